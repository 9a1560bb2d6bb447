// kiln_test_helper: started many times by the multi-process tests. Filled in with the JIT runtime.
int main() { return 0; }
