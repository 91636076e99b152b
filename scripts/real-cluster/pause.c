/* The sandbox ("pause") program of the e2e cluster's pods: it holds the pod's namespaces and
 * does nothing else. PID 1 of a pod that shares its PID namespace, so it reaps every child
 * that is reparented to it; SIGTERM or SIGINT ends it with status 0. Built static by
 * scripts/real-cluster/images.sh into localhost/rdp-pause:1, the image containerd's CRI is
 * pinned to (no registry is reachable from the test machines). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	int saved = errno;

	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	errno = saved;
}

int main(void)
{
	struct sigaction term = {.sa_handler = stop}, chld = {.sa_handler = reap, .sa_flags = SA_RESTART | SA_NOCLDSTOP};

	if (sigaction(SIGTERM, &term, NULL) < 0 || sigaction(SIGINT, &term, NULL) < 0 ||
	    sigaction(SIGCHLD, &chld, NULL) < 0)
		return 1;
	for (;;)
		pause();
}
