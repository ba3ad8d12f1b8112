#!/usr/bin/env python3
"""Measures the structure of the repository's C++ code and prints a report.

  functions over N lines  every function definition (free, member out of line or in a class
                          body) whose lines, from its signature's first line to its closing
                          brace, number more than N (--max-function-lines, 100)
  files over N lines      every C++ source (.cc .h .cu .cuh) of more than N lines
                          (--max-file-lines, 700)
  upward includes         an `#include "B/..."` in a file of layer A where B is a layer above
                          A (LAYERS below); files outside the layers are not checked
  include cycles          modules that include each other (.ci/include_cycles.py)

tests/ and cudaemu/ are left out of the first two measures unless --all is given. Ends with
one line per measure, "<measure>: <count>". Exits 0 (a report), or with --check 1 when any
count is not 0. Run from the repository root, or name it with --root.

How functions are found: comments, string and character literals (raw strings included) and
preprocessor lines are blanked first, and of each #if/#elif/#else chain only the first branch
is read, so braces in any of them do not count. Then every `{` outside a function is
classified by the declaration in front of it: a namespace, an extern "C" block or a class,
struct or union body is descended into; an enum, a brace initializer (`x = {...}`,
`Foo foo{...}`) or a member initializer in a constructor's list (`a_{1}`) is not a function;
what remains with a parameter list is a function. A function's body is not looked into: its
lambdas and local classes are counted as part of it.
"""
import argparse
import os
import re
import sys

sys.dont_write_bytecode = True  # no .ci/__pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import include_cycles  # noqa: E402

# The layers, bottom to top. A tuple is one level: its folders are peers (none is above the
# other) and may include the levels below. Subfolders belong to their top folder.
LAYERS = ["util", "device", "ops", "data", "strategy", "model", ("tools", "examples", "bench")]

# Upward includes made on purpose: a path, or a folder when it ends in "/". The fixture
# //strategy/layering_check:upward_dependency (strategy -> model) must fail to build: .ci/layering
# checks that BUILD visibility refuses it.
ALLOWED_UPWARD = {"strategy/layering_check/"}

# Left out of the function and file measures unless --all.
EXCLUDED_BY_DEFAULT = ("tests", "cudaemu")

CXX_EXTENSIONS = (".cc", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def level_of():
    """{top folder: its level}, 0 the bottom."""
    levels = {}
    for level, entry in enumerate(LAYERS):
        for name in (entry if isinstance(entry, tuple) else (entry,)):
            levels[name] = level
    return levels


# ---- finding the files ----------------------------------------------------------------------

def cxx_files(root, everything=False):
    """The repository's C++ sources, as sorted paths relative to `root` with "/" separators.
    Hidden folders and Bazel's output links (bazel-*) are never read."""
    found = []
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        relative = "" if relative == "." else relative.replace(os.sep, "/")
        keep = []
        for name in sorted(dirs):
            if name.startswith(".") or name.startswith("bazel-"):
                continue
            if not relative and not everything and name in EXCLUDED_BY_DEFAULT:
                continue
            keep.append(name)
        dirs[:] = keep
        for name in files:
            if name.endswith(CXX_EXTENSIONS):
                found.append(relative + "/" + name if relative else name)
    return sorted(found)


def read(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read()


# ---- the lexer ------------------------------------------------------------------------------

class Token:
    __slots__ = ("text", "line")

    def __init__(self, text, line):
        self.text = text
        self.line = line

    def __repr__(self):
        return "%s@%d" % (self.text, self.line)


PUNCTUATION = ["<<=", ">>=", "->*", "...", "::", "->", "<<", ">>", "<=", ">=", "==", "!=",
               "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", ".*"]
IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z_0-9$]*")
NUMBER = re.compile(r"\.?[0-9](?:[eEpP][+-]|[A-Za-z0-9_.']|'(?=[0-9A-Za-z]))*")
STRING_PREFIXES = ("u8", "u", "U", "L")
RAW_PREFIXES = ("R", "u8R", "uR", "UR", "LR")


def tokens(text):
    """The tokens of C++ source `text` that matter to its structure: identifiers, numbers,
    punctuation, and each string or character literal as `""` or `''`. Comments and
    preprocessor lines are dropped, and so is every #elif/#else branch (the first branch of a
    conditional is read), so that a declaration written twice under #if keeps its braces
    balanced."""
    out = []
    i, n, line = 0, len(text), 1
    at_line_start = True
    skipping = []  # per open #if: True while in a branch after the first

    def emit(token_text, token_line):
        if not any(skipping):
            out.append(Token(token_text, token_line))

    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":  # a line continued
            i += 2
            line += 1
            continue
        if c == "#" and at_line_start:
            # A preprocessor line, with its continuations and comments.
            start = i
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    i += 2
                    line += 1
                    continue
                if text.startswith("/*", i):
                    end = text.find("*/", i + 2)
                    end = n if end < 0 else end + 2
                    line += text.count("\n", i, end)
                    i = end
                    continue
                if text.startswith("//", i):
                    while i < n and text[i] != "\n":
                        i += 1
                    break
                i += 1
            directive = re.match(r"#\s*(\w+)", text[start:i])
            word = directive.group(1) if directive else ""
            if word in ("if", "ifdef", "ifndef"):
                skipping.append(False)
            elif word in ("elif", "else") and skipping:
                skipping[-1] = True
            elif word == "endif" and skipping:
                skipping.pop()
            continue
        at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    line += 1
                    i += 1
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            line += text.count("\n", i, end)
            i = end
            continue
        match = IDENTIFIER.match(text, i)
        if match:
            word = match.group(0)
            after = match.end()
            if word in RAW_PREFIXES and after < n and text[after] == '"':
                i, line = raw_string(text, after, line, emit)
                continue
            if word in STRING_PREFIXES and after < n and text[after] in "\"'":
                i, line = quoted(text, after, line, emit)
                continue
            emit(word, line)
            i = after
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            match = NUMBER.match(text, i)
            emit("0", line)
            i = match.end()
            continue
        if c in "\"'":
            i, line = quoted(text, i, line, emit)
            continue
        for punctuation in PUNCTUATION:
            if text.startswith(punctuation, i):
                emit(punctuation, line)
                i += len(punctuation)
                break
        else:
            emit(c, line)
            i += 1
    return out


def quoted(text, i, line, emit):
    """A string or character literal whose quote is at `i`: emits it, returns (end, line)."""
    quote = text[i]
    start_line = line
    j, n = i + 1, len(text)
    while j < n and text[j] != quote:
        if text[j] == "\\" and j + 1 < n:
            if text[j + 1] == "\n":
                line += 1
            j += 2
            continue
        if text[j] == "\n":  # unterminated: stop at the line's end
            break
        j += 1
    emit(quote * 2, start_line)
    return j + 1, line


def raw_string(text, i, line, emit):
    """A raw string literal whose quote is at `i`: R"delimiter( ... )delimiter"."""
    open_paren = text.find("(", i)
    delimiter = text[i + 1:open_paren] if open_paren >= 0 else ""
    end = text.find(")" + delimiter + '"', open_paren + 1) if open_paren >= 0 else -1
    end = len(text) if end < 0 else end + len(delimiter) + 2
    emit('""', line)
    return end, line + text.count("\n", i, end)


# ---- the declarations -----------------------------------------------------------------------

class Group:
    """A bracketed group, ( ), [ ] or { }, within a declaration."""
    __slots__ = ("text", "line", "end_line", "inner")

    def __init__(self, text, line, end_line, inner):
        self.text = text  # "(", "[" or "{"
        self.line = line
        self.end_line = end_line
        self.inner = inner  # the tokens between the brackets


CLOSING = {"(": ")", "[": "]", "{": "}"}
CLASS_KEYS = ("class", "struct", "union")
# Identifiers whose parenthesised group is not a parameter list.
NOT_A_NAME = {"alignas", "__attribute__", "__declspec", "__launch_bounds__", "decltype",
              "noexcept", "throw", "sizeof", "alignof", "typeid", "static_assert", "asm",
              "__asm__", "requires", "explicit", "if", "for", "while", "switch", "return"}
LEADING = {"template", "typedef", "static", "inline", "constexpr", "extern", "friend", "virtual",
           "explicit", "thread_local", "const", "volatile", "__host__", "__device__",
           "__global__", "__forceinline__", "consteval", "constinit"}


def matching(toks, i):
    """The index of the bracket closing the one at toks[i] (balanced over ( [ {)."""
    depth = 0
    for j in range(i, len(toks)):
        text = toks[j].text
        if text in ("(", "[", "{"):
            depth += 1
        elif text in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def strip_templates(head):
    """`head` without its leading template<...> clauses, attributes and specifiers."""
    i = 0
    while i < len(head):
        item = head[i]
        if isinstance(item, Group):
            if item.text == "[":  # [[attribute]]
                i += 1
                continue
            break
        if item.text == "template" and i + 1 < len(head) and \
                not isinstance(head[i + 1], Group) and head[i + 1].text == "<":
            i = skip_angles(head, i + 1)
            continue
        if item.text in LEADING:
            i += 1
            continue
        break
    return head[i:]


def skip_angles(head, i):
    """The index after the `>` closing the `<` at head[i]."""
    depth = 0
    while i < len(head):
        item = head[i]
        if not isinstance(item, Group):
            if item.text == "<":
                depth += 1
            elif item.text == ">":
                depth -= 1
            elif item.text == ">>":
                depth -= 2
            if depth <= 0:
                return i + 1
        i += 1
    return i


def top_level(head):
    """The items of `head` outside template argument lists, as (index, item): a `<` opens one
    after a name, `template`, `operator<` aside."""
    result = []
    depth = 0
    previous = None
    for index, item in enumerate(head):
        text = None if isinstance(item, Group) else item.text
        if text == "<" and previous is not None and not isinstance(previous, Group) and \
                (IDENTIFIER.fullmatch(previous.text) or previous.text == ">") and \
                previous.text != "operator":
            depth += 1
        elif text in (">", ">>") and depth > 0:
            depth = max(0, depth - len(text))
        elif depth == 0:
            result.append((index, item))
        previous = item
    return result


def parameter_list(head):
    """(index of the parameter list's group in `head`, the function's name), or None when
    `head` declares no function."""
    items = top_level(head)
    for position, (index, item) in enumerate(items):
        if isinstance(item, Group) or item.text != "operator":
            continue
        # operator+, operator(), operator new[], operator bool: the name runs to the first
        # ( group, or to the second when the first is operator()'s own empty one.
        parts = []
        for later_index, later in items[position + 1:]:
            if isinstance(later, Group) and later.text == "(":
                if not parts and not later.inner:
                    parts.append("()")
                    continue
                words = " ".join(parts)
                return later_index, qualified(head, index) + "operator" + (
                    " " + words if IDENTIFIER.match(words) else words)
            parts.append("[]" if isinstance(later, Group) else later.text)
        return None
    for position, (index, item) in enumerate(items):
        if not (isinstance(item, Group) and item.text == "(" and position > 0):
            continue
        before_index, before = items[position - 1]
        if isinstance(before, Group) or before.text in NOT_A_NAME:
            continue
        if not IDENTIFIER.fullmatch(before.text):
            continue
        name = qualified(head, before_index) + before.text
        if re.fullmatch(r"[A-Z][A-Z0-9_]*", before.text) and item.inner:
            name += "(" + spelled(item.inner) + ")"  # TEST(Suite, Name)
        return index, name
    return None


def qualified(head, index):
    """The qualifiers written before head[index]: "Foo::" of Foo::Bar, "Foo<T>::" of
    Foo<T>::Bar, "Foo::~" of Foo::~Foo."""
    parts = []
    i = index - 1
    if i >= 0 and not isinstance(head[i], Group) and head[i].text == "~":
        parts.append("~")
        i -= 1
    while i >= 1 and not isinstance(head[i], Group) and head[i].text == "::":
        j = i - 1
        if not isinstance(head[j], Group) and head[j].text == ">":  # Foo<T>::
            depth = 0
            while j >= 0:
                if not isinstance(head[j], Group):
                    depth += {">": 1, ">>": 2, "<": -1}.get(head[j].text, 0)
                if depth <= 0:
                    break
                j -= 1
            j -= 1
        if j < 0 or isinstance(head[j], Group) or not IDENTIFIER.fullmatch(head[j].text):
            break
        parts.append("::")
        parts.append(head[j].text)
        i = j - 1
    return "".join(reversed(parts))


def spelled(toks):
    return re.sub(r" ?([,)\]]) ?", r"\1 ", " ".join(t.text for t in toks)).replace(
        "( ", "(").strip().rstrip(",")


def classify(head):
    """What the `{` after declaration `head` opens: "scope" (a namespace or extern "C"),
    "class", "function", or "other" (an enum, an initializer, a member initializer)."""
    if not head:
        return "other"  # a block at namespace scope: none in C++, but tolerate it
    words = [None if isinstance(item, Group) else item.text for item in head]
    if words[0] == "namespace" or words[:2] == ["inline", "namespace"]:
        return "scope"
    if words[0] == "extern" and len(head) == 2 and words[1] == '""':
        return "scope"
    stripped = strip_templates(head)
    if not stripped:
        return "other"
    first = None if isinstance(stripped[0], Group) else stripped[0].text
    if first == "enum":
        return "other"
    items = top_level(head)
    if any(not isinstance(item, Group) and item.text == "=" and
           (k == 0 or isinstance(items[k - 1][1], Group) or items[k - 1][1].text != "operator")
           for k, (_, item) in enumerate(items)):
        return "other"  # an initializer: x = {...}, a lambda, an aggregate
    found = parameter_list(stripped)
    if first in CLASS_KEYS and found is None:
        return "class"
    if found is None:
        return "other"  # Foo foo{...}, std::vector<int> v{...}
    index, _ = found
    after = stripped[index + 1:]
    # A constructor's member initializers: `Foo() : a_(1), b_{2} {`. The brace after an
    # identifier is a member's initializer, the one after a group is the body.
    if any(not isinstance(item, Group) and item.text == ":" for item in after):
        last = after[-1]
        if not isinstance(last, Group) and last.text != "...":
            return "other"
    return "function"


def class_name(head):
    """The name of the class `head` defines: the last name before its bases or template
    arguments, so "Foo" of `class TOWER_EXPORT Foo final : public Bar` and "Outer::Inner" of
    `struct Outer::Inner`; "" when anonymous."""
    runs = []
    qualifying = False
    for item in strip_templates(head):
        if isinstance(item, Group):
            qualifying = False  # alignas(64), [[attributes]]
            continue
        if item.text in (":", "<", "final"):
            break
        if item.text == "::":
            qualifying = True
        elif IDENTIFIER.fullmatch(item.text) and item.text not in CLASS_KEYS:
            if qualifying and runs:
                runs[-1].append(item.text)
            else:
                runs.append([item.text])
            qualifying = False
    return "::".join(runs[-1]) if runs else ""


def standalone_macro(head, token):
    """Whether `head` is a macro's use with no semicolon after it, MACRO(...), ended on a
    line before `token`, an identifier that starts the next declaration."""
    return (len(head) >= 2 and isinstance(head[-1], Group) and head[-1].text == "(" and
            not isinstance(head[-2], Group) and re.fullmatch(r"[A-Z][A-Z0-9_]*", head[-2].text)
            and head[-1].end_line < token.line and IDENTIFIER.fullmatch(token.text) is not None)


def functions(text):
    """Every function defined in C++ source `text`: (name, first line, last line)."""
    toks = tokens(text)
    found = []

    def scope(i, prefix):
        """Reads declarations from toks[i] to the `}` closing the scope; returns its index."""
        head = []
        while i < len(toks):
            t = toks[i]
            text = t.text
            if text == ";":
                head = []
            elif text == "}":
                return i
            elif text in ("(", "["):
                end = matching(toks, i)
                head.append(Group(text, t.line, toks[end].line, toks[i + 1:end]))
                i = end
            elif text in ("public", "private", "protected") and i + 1 < len(toks) and \
                    toks[i + 1].text == ":":
                head = []
                i += 1
            elif text == "{":
                kind = classify(head)
                if kind == "scope":
                    i = scope(i + 1, prefix)
                    head = []
                elif kind == "class":
                    name = class_name(head)
                    i = scope(i + 1, prefix + name + "::" if name else prefix)
                    head = []
                elif kind == "function":
                    end = matching(toks, i)
                    _, name = parameter_list(strip_templates(head))
                    found.append((prefix + name, head[0].line,
                                  toks[end].line if end < len(toks) else t.line))
                    i = end
                    head = []
                else:
                    end = matching(toks, i)
                    head.append(Group("{", t.line, toks[end].line, toks[i + 1:end]))
                    i = end
            elif text in (")", "]"):
                pass  # unbalanced: tolerate
            else:
                if standalone_macro(head, t):
                    head = []
                head.append(t)
            i += 1
        return i

    i = 0
    while i < len(toks):
        i = scope(i, "") + 1  # a stray `}` at file scope: go on after it
    return found


# ---- the measures ---------------------------------------------------------------------------

def long_functions(root, files, limit):
    """[(path, line, name, lines)] of the functions longer than `limit` lines, longest first."""
    result = []
    for path in files:
        for name, first, last in functions(read(root, path)):
            lines = last - first + 1
            if lines > limit:
                result.append((path, first, name, lines))
    return sorted(result, key=lambda r: (-r[3], r[0], r[1]))


def long_files(root, files, limit):
    """[(path, lines)] of the files longer than `limit` lines, longest first."""
    result = []
    for path in files:
        lines = len(read(root, path).splitlines())
        if lines > limit:
            result.append((path, lines))
    return sorted(result, key=lambda r: (-r[1], r[0]))


def allowed(path):
    return any(path == entry or (entry.endswith("/") and path.startswith(entry))
               for entry in ALLOWED_UPWARD)


def upward_includes(root):
    """([(path, line, included)] upward includes, [the same] allowed by ALLOWED_UPWARD)."""
    levels = level_of()
    upward, permitted = [], []
    for path in cxx_files(root, everything=True):
        layer = path.split("/", 1)[0]
        if layer not in levels or "/" not in path:
            continue
        text = read(root, path)
        for match in INCLUDE.finditer(text):
            included = match.group(1)
            target = included.split("/", 1)[0]
            if "/" in included and target in levels and levels[target] > levels[layer]:
                entry = (path, text.count("\n", 0, match.start()) + 1, included)
                (permitted if allowed(path) else upward).append(entry)
    return upward, permitted


def include_cycle_list(root):
    return include_cycles.cycles(include_cycles.modules(root))


def none(entries):
    if not entries:
        print("  none")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=".", help="the repository root (default: .)")
    parser.add_argument("--all", action="store_true",
                        help="measure functions and files in %s too" %
                        " and ".join(d + "/" for d in EXCLUDED_BY_DEFAULT))
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when any measure is not 0")
    parser.add_argument("--max-function-lines", type=int, default=100, metavar="N",
                        help="report functions longer than N lines (default: 100)")
    parser.add_argument("--max-file-lines", type=int, default=700, metavar="N",
                        help="report C++ files longer than N lines (default: 700)")
    args = parser.parse_args(argv)
    root = args.root

    files = cxx_files(root, args.all)
    scope = "" if args.all else " (%s left out: --all includes them)" % " and ".join(
        d + "/" for d in EXCLUDED_BY_DEFAULT)

    funcs = long_functions(root, files, args.max_function_lines)
    print("functions over %d lines%s:" % (args.max_function_lines, scope))
    for path, line, name, lines in funcs:
        print("  %s:%d  %s  %d lines" % (path, line, name, lines))
    none(funcs)

    big = long_files(root, files, args.max_file_lines)
    print("files over %d lines%s:" % (args.max_file_lines, scope))
    for path, lines in big:
        print("  %s  %d lines" % (path, lines))
    none(big)

    upward, permitted = upward_includes(root)
    print("upward includes (layers, bottom to top: %s):" % " < ".join(
        "/".join(e) if isinstance(e, tuple) else e for e in LAYERS))
    for path, line, included in upward:
        print("  %s:%d  includes %s" % (path, line, included))
    for path, line, included in permitted:
        print("  %s:%d  includes %s (allowed: ALLOWED_UPWARD)" % (path, line, included))
    none(upward + permitted)

    cycles = include_cycle_list(root)
    print("include cycles (.ci/include_cycles.py):")
    for component in cycles:
        print("  " + " <-> ".join(component))
    none(cycles)

    counts = [("functions over %d lines" % args.max_function_lines, len(funcs)),
              ("files over %d lines" % args.max_file_lines, len(big)),
              ("upward includes", len(upward)),
              ("include cycles", len(cycles))]
    print("")
    for label, count in counts:
        print("%s: %d" % (label, count))
    if args.check and any(count for _, count in counts):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
