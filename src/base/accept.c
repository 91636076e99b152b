/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "accept.h"

#include <errno.h>
#include <string.h>

int rdp_accept_some(int listen_fd, unsigned int max, rdp_accept_cb take, void *ud)
{
	for (unsigned int i = 0; i < max; i++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd;

		memset(&ss, 0, sizeof(ss));
		fd = accept4(listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			return -errno;
		}
		if (sl > sizeof(ss))
			sl = sizeof(ss);
		take(fd, (const struct sockaddr *)&ss, ss.ss_family == AF_UNSPEC ? 0 : sl, ud);
	}
	return 0;
}
