// The demo: written once the JIT runtime and the quantisation kernels exist.
int main() { return 0; }
