/*
 * Sandbox ("pause") process for the local e2e cluster: holds the pod's
 * namespaces, reaps re-parented children and exits on SIGINT/SIGTERM.
 * Built statically by e2e/cluster/install.sh and packed into an image by
 * e2e/images/system-images.sh.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
    (void)sig;
    _exit(0);
}

static void on_child(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && argv[1][0] == '-' && argv[1][1] == 'v') {
        puts("pause " PAUSE_VERSION);
        return 0;
    }
    if (getpid() != 1) {
        fputs("pause: warning: not running as PID 1\n", stderr);
    }
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    sigemptyset(&stop.sa_mask);
    sigemptyset(&child.sa_mask);
    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    for (;;) {
        pause();
    }
}
