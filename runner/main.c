#include <stdio.h>
int main(void) { puts("tandem"); return 0; }
