#!/usr/bin/env python3
"""structure.py on small trees made for each case: each measure, and the C++ that could fool
the function finder (braces in strings, raw strings, comments and initializers).

Run by .ci/run; ends with "structure_test: N passed, N failed".
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no .ci/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure  # noqa: E402


def statements(n):
    """`n` lines of a function body."""
    return "".join("  x += %d;\n" % k for k in range(n))


def function(name, lines, signature=None):
    """A function of exactly `lines` lines, its signature and closing brace included."""
    signature = signature or "void %s(int x)" % name
    return "%s {\n%s}\n" % (signature, statements(lines - 2))


def found(text):
    """{name: lines} of the functions structure.functions finds in `text`."""
    result = {}
    for name, first, last in structure.functions(text):
        result[name] = last - first + 1
    return result


class Tree:
    """A temporary repository: write(path, text), then measure it."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name

    def write(self, path, text):
        full = os.path.join(self.root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def run(self, *args):
        """(exit status, output) of structure.py on the tree."""
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = structure.main(["--root", self.root] + list(args))
        return status, out.getvalue()

    def summary(self, *args):
        """{measure: count} from the summary's lines."""
        _, output = self.run(*args)
        block = output.rstrip("\n").split("\n\n")[-1]
        return {line.rsplit(": ", 1)[0]: int(line.rsplit(": ", 1)[1])
                for line in block.splitlines()}

    def close(self):
        self.dir.cleanup()


class FunctionsTest(unittest.TestCase):
    def test_a_function_over_the_limit_counts_from_its_signature_to_its_brace(self):
        text = "#include <x>\n\n" + function("Long", 101) + "\n" + function("Short", 100)
        self.assertEqual(found(text), {"Long": 101, "Short": 100})
        self.assertEqual(structure.functions(text)[0][1:], (3, 103))

    def test_a_signature_over_several_lines_counts_from_its_first(self):
        text = "template <typename T>\nstd::vector<T>\nLong(int a,\n     int b) {\n" + \
            statements(10) + "}\n"
        self.assertEqual(structure.functions(text), [("Long", 1, 15)])

    def test_a_brace_in_a_string_a_character_or_after_a_digit_separator(self):
        text = function("WithStrings", 20).replace(
            "  x += 0;", '  s = "{{ \\" {";\n  c = \'{\';\n  d = \'\\\'\';\n  t = u8"}";\n'
            "  n = 1'000; c = '{';") + \
            function("After", 5)
        self.assertEqual(found(text), {"WithStrings": 24, "After": 5})

    def test_a_raw_string_with_braces(self):
        text = function("WithRaw", 20).replace(
            "  x += 0;", '  s = R"json({\n  "a": { "b": "}}" \n)" }\n)json";') + \
            function("After", 5)
        self.assertEqual(found(text), {"WithRaw": 23, "After": 5})

    def test_a_comment_with_braces(self):
        text = function("WithComments", 20).replace(
            "  x += 0;", "  // } closes nothing\n  /* {\n  { */ x = 1;  // \"{") + \
            "/* } */\n" + function("After", 5)
        self.assertEqual(found(text), {"WithComments": 22, "After": 5})

    def test_an_inline_member_function_in_a_class(self):
        text = ("class TOWER_EXPORT Foo final : public Bar<int> {\n public:\n" +
                function("Run", 120, "  void Run() const override") +
                "  int x_ = 0;\n  std::vector<int> v_{1, 2};\n};\n"
                "struct alignas(64) Padded {\n" + function("Get", 3, "  int Get()") + "};\n")
        self.assertEqual(found(text), {"Foo::Run": 120, "Padded::Get": 3})

    def test_functions_in_namespaces_and_extern_c(self):
        text = ("namespace tower {\nnamespace {\n" + function("Long", 150) + "}  // namespace\n"
                "}  // namespace tower\n" + 'extern "C" {\n' + function("CLong", 110) + "}\n")
        self.assertEqual(found(text), {"Long": 150, "CLong": 110})

    def test_a_lambda_is_part_of_its_function(self):
        lambda_ = "  auto f = [&](int y) {\n" + statements(50) + "  };\n"
        text = function("WithLambda", 110).replace("  x += 0;\n", lambda_, 1)
        self.assertEqual(found(text), {"WithLambda": 161})

    def test_member_initializers_are_not_functions(self):
        text = ("Foo::Foo(int a)\n    : a_{a},\n      b_(a),\n      c_{{1, 2}, {3}} {\n" +
                statements(110) + "}\n" +
                function("After", 4, "Foo::~Foo()"))
        self.assertEqual(found(text), {"Foo::Foo": 115, "Foo::~Foo": 4})

    def test_initializers_are_not_functions(self):
        long_list = "".join("    {%d, \"{\"},\n" % k for k in range(120))
        text = ("const Entry kTable[] = {\n" + long_list + "};\n"
                "std::vector<int> kValues{\n" + long_list.replace('"{"', "0") + "};\n"
                "auto kCall = [](int a) {\n" + statements(120) + "};\n"
                "const int kSum = Sum(1, 2) + Pair{\n" + statements(120) + "}.first;\n"
                "enum class Big : int {\n" + "".join("  k%d,\n" % k for k in range(120)) +
                "};\n" + function("After", 3))
        self.assertEqual(found(text), {"After": 3})

    def test_conditional_compilation_keeps_the_first_branch(self):
        text = ("#if defined(A)\nvoid Twice(int a) {\n#else\nvoid Twice(int a, int b) {\n"
                "#endif\n" + statements(3) + "}\n#define OPEN {\n" + function("After", 3))
        self.assertEqual(found(text), {"Twice": 8, "After": 3})

    def test_names_of_operators_templates_and_macros(self):
        text = ("template <typename T, typename = std::enable_if_t<(sizeof(T) > 1)>>\n"
                "T Sum(T a) { return a; }\n"
                "bool Foo<T>::operator==(const Foo& o) const { return true; }\n"
                "Foo& Foo::operator=(const Foo& o) { return *this; }\n"
                "void Foo::operator()(int a) {}\n"
                "Foo::operator bool() const { return true; }\n"
                "TEST(Suite, Case) {\n}\n"
                "DEFINE_THING(Name, kCode)\n"
                "void AfterMacro() {}\n")
        self.assertEqual(structure.functions(text), [
            ("Sum", 1, 2), ("Foo::operator==", 3, 3), ("Foo::operator=", 4, 4),
            ("Foo::operator()", 5, 5), ("Foo::operator bool", 6, 6),
            ("TEST(Suite, Case)", 7, 8), ("AfterMacro", 10, 10)])

    def test_the_measure_over_a_tree(self):
        tree = Tree()
        try:
            tree.write("model/a.cc", function("Long", 101) + function("Short", 100))
            tree.write("strategy/collectives/cuda/b.cu",
                       function("Kernel", 130, "__global__ void Kernel()"))
            tree.write("tests/model/a_test.cc", function("LongTest", 200))
            tree.write("cudaemu/c.cc", function("Emulated", 200))
            tree.write("tools/script.py", "x = 1\n" * 200)
            status, output = tree.run()
            self.assertEqual(status, 0)
            self.assertIn("  strategy/collectives/cuda/b.cu:1  Kernel  130 lines\n", output)
            self.assertIn("  model/a.cc:1  Long  101 lines\n", output)
            self.assertEqual(tree.summary()["functions over 100 lines"], 2)
            self.assertEqual(tree.summary("--all")["functions over 100 lines"], 4)
            self.assertEqual(tree.summary("--max-function-lines", "99")
                             ["functions over 99 lines"], 3)
        finally:
            tree.close()


class FilesTest(unittest.TestCase):
    def test_cxx_files_over_the_limit(self):
        tree = Tree()
        try:
            tree.write("model/big.cc", "int x;\n" * 701)
            tree.write("model/limit.h", "int x;\n" * 700)
            tree.write("ops/cuda/big.cuh", "int x;\n" * 800)
            tree.write("tools/big.py", "x = 1\n" * 900)
            tree.write("tools/big.sh", "true\n" * 900)
            tree.write("tests/big_test.cc", "int x;\n" * 900)
            tree.write("cudaemu/big.cc", "int x;\n" * 900)
            tree.write("bazel-out/big.cc", "int x;\n" * 900)
            status, output = tree.run()
            self.assertEqual(status, 0)
            self.assertIn("  ops/cuda/big.cuh  800 lines\n  model/big.cc  701 lines\n", output)
            self.assertEqual(tree.summary()["files over 700 lines"], 2)
            self.assertEqual(tree.summary("--all")["files over 700 lines"], 4)
            self.assertEqual(tree.summary("--max-file-lines", "699")["files over 699 lines"], 3)
        finally:
            tree.close()


class UpwardIncludesTest(unittest.TestCase):
    def test_an_include_into_a_higher_layer(self):
        tree = Tree()
        try:
            tree.write("strategy/a.cc", '#include "strategy/a.h"\n#include "util/status.h"\n'
                                        '#include "model/sequential.h"\n')
            tree.write("model/sub/b.cc", '#include "strategy/a.h"\n  #  include "tools/x.h"\n')
            tree.write("tools/c.cc", '#include "bench/d.h"\n#include "strategy/b.h"\n')
            tree.write("bench/d.cc", '#include "examples/e.h"\n')
            tree.write("util/e.h", '// #include "model/a.h"\n#include <model/a.h>\n')
            tree.write("tests/f.cc", '#include "tools/c.h"\n')
            tree.write("cudaemu/g.cc", '#include "strategy/b.h"\n')
            tree.write("strategy/layering_check/h.cc", '#include "model/sequential.h"\n')
            status, output = tree.run()
            self.assertEqual(status, 0)
            self.assertIn("  strategy/a.cc:3  includes model/sequential.h\n", output)
            self.assertIn("  model/sub/b.cc:2  includes tools/x.h\n", output)
            self.assertIn("  strategy/layering_check/h.cc:1  includes model/sequential.h "
                          "(allowed: ALLOWED_UPWARD)\n", output)
            self.assertEqual(tree.summary()["upward includes"], 2)
        finally:
            tree.close()

    def test_the_layers_are_one_list(self):
        levels = structure.level_of()
        self.assertLess(levels["util"], levels["device"])
        self.assertLess(levels["strategy"], levels["model"])
        self.assertLess(levels["strategy"], levels["tools"])
        self.assertEqual(levels["tools"], levels["bench"])
        self.assertEqual(levels["tools"], levels["examples"])
        self.assertNotIn("tests", levels)


class IncludeCyclesTest(unittest.TestCase):
    def test_a_cycle_between_two_modules(self):
        tree = Tree()
        try:
            tree.write("model/a.h", "")
            tree.write("model/a.cc", '#include "model/a.h"\n#include "model/b.h"\n')
            tree.write("model/b.h", "")
            tree.write("model/b.cc", '#include "model/b.h"\n#include "model/a.h"\n')
            tree.write("model/c.cc", '#include "model/a.h"\n')
            status, output = tree.run()
            self.assertIn("  model/a <-> model/b\n", output)
            self.assertEqual(tree.summary()["include cycles"], 1)
        finally:
            tree.close()


class ExitStatusTest(unittest.TestCase):
    def test_a_report_exits_0_and_check_exits_1_on_any_count(self):
        tree = Tree()
        try:
            tree.write("model/a.cc", function("Short", 10))
            self.assertEqual(tree.run("--check")[0], 0)
            self.assertEqual(tree.summary(), {
                "functions over 100 lines": 0, "files over 700 lines": 0,
                "upward includes": 0, "include cycles": 0})
            tree.write("data/b.cc", '#include "model/a.h"\n')
            self.assertEqual(tree.run()[0], 0)
            self.assertEqual(tree.run("--check")[0], 1)
        finally:
            tree.close()


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print("structure_test: %d passed, %d failed" % (result.testsRun - failed, failed))
    sys.exit(1 if failed else 0)
