// hack: fork helpers that burn CPU side by side, so the main process's own CPU clock stays low
// expect: timeout
// reason: CPU time over the 2 s limit
// The case's cgroup counts every process of the tree: 3 x 0.8 s = 2.4 s > 2.0 s on every case.
#include <cstdio>
#include <ctime>
#include <sys/wait.h>
#include <unistd.h>

static void burn(double seconds) {
    timespec t{};
    volatile unsigned long long z = 0;
    for (;;) {
        for (int i = 0; i < 20000; ++i) z += i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        if (t.tv_sec + t.tv_nsec * 1e-9 >= seconds) return;
    }
}

int main() {
    for (int k = 0; k < 3; ++k) {
        if (fork() == 0) {
            burn(0.8);
            _exit(0);
        }
    }
    while (wait(nullptr) > 0) {
    }
    std::fputs("0\n", stdout);  // never judged: every case is over the CPU limit first
    return 0;
}
