int cuInit(unsigned flags) { (void)flags; return 0; }
