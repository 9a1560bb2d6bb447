// The kiln command: written by the CLI work.
int main() { return 0; }
