// Nothing to run: install/BUILD links the public libraries through this to have their
// objects built (install.sh archives them).
int main() { return 0; }
