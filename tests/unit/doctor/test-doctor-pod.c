/* SPDX-License-Identifier: MIT */
/* The pure parts of the pod group of doctor (src/doctor/doctor-pod.h): NCCL's list syntax and
 * matching, and the procfs parsers. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "doctor-pod.h"
#include "test.h"

static bool sel(const char *v, const char *name, int port)
{
	struct rdp_nccl_list l;

	rdp_nccl_list_parse(v, RDP_NCCL_IB_MAX_ENTRIES, &l);
	return rdp_nccl_list_selects(&l, name, port);
}

static void test_nccl_parse(void)
{
	struct rdp_nccl_list l;

	rdp_nccl_list_parse(NULL, 32, &l);
	EXPECT_EQ(l.n, 0);
	EXPECT_TRUE(!l.exclude && !l.exact);
	rdp_nccl_list_parse("^=mlx5_1:1,mlx5_2", 32, &l);
	EXPECT_TRUE(l.exclude && l.exact);
	EXPECT_EQ(l.n, 2);
	EXPECT_STREQ(l.v[0].name, "mlx5_1");
	EXPECT_EQ(l.v[0].port, 1);
	EXPECT_EQ(l.v[1].port, -1);
	/* '=' then '^': the '^' is part of the name */
	rdp_nccl_list_parse("=^mlx5_1", 32, &l);
	EXPECT_TRUE(l.exact && !l.exclude);
	EXPECT_STREQ(l.v[0].name, "^mlx5_1");
	/* rail and plane read past; an empty port is any port */
	rdp_nccl_list_parse("=mlx5_0::0:0,mlx5_3:2:1:0", 32, &l);
	EXPECT_EQ(l.n, 2);
	EXPECT_EQ(l.v[0].port, -1);
	EXPECT_TRUE(!l.v[0].bad_port);
	EXPECT_EQ(l.v[1].port, 2);
	/* empty entries and entries without a name are skipped */
	rdp_nccl_list_parse(",,:1,mlx5_0,", 32, &l);
	EXPECT_EQ(l.n, 1);
	/* bad ports */
	rdp_nccl_list_parse("mlx5_0:x,mlx5_1:0,mlx5_2:1x", 32, &l);
	EXPECT_EQ(l.n, 3);
	EXPECT_TRUE(l.v[0].bad_port && l.v[1].bad_port && l.v[2].bad_port);
	/* too long a name: cut, flagged */
	{
		char v[200];

		memset(v, 'a', sizeof(v) - 1);
		v[sizeof(v) - 1] = '\0';
		rdp_nccl_list_parse(v, 32, &l);
		EXPECT_EQ(l.n, 1);
		EXPECT_TRUE(l.v[0].bad_name);
		EXPECT_EQ(strlen(l.v[0].name), RDP_NCCL_NAME_MAX - 1);
	}
	/* more than max entries: the rest dropped */
	{
		char v[1024] = "";

		for (int i = 0; i < 40; i++)
			snprintf(v + strlen(v), sizeof(v) - strlen(v), "%smlx5_%d", i ? "," : "", i);
		rdp_nccl_list_parse(v, 32, &l);
		EXPECT_EQ(l.n, 32);
		EXPECT_EQ(l.n_dropped, 8);
		rdp_nccl_list_parse(v, RDP_NCCL_IF_MAX_ENTRIES, &l);
		EXPECT_EQ(l.n, 16);
		EXPECT_EQ(l.n_dropped, 24);
	}
}

static void test_nccl_match(void)
{
	/* unset: everything */
	EXPECT_TRUE(sel(NULL, "mlx5_0", 1));
	EXPECT_TRUE(sel("", "mlx5_0", 1));
	/* the prefix pitfall */
	EXPECT_TRUE(sel("mlx5_1", "mlx5_1", 1));
	EXPECT_TRUE(sel("mlx5_1", "mlx5_10", 1));
	EXPECT_TRUE(sel("mlx5_1", "mlx5_11", 1));
	EXPECT_TRUE(!sel("mlx5_1", "mlx5_2", 1));
	EXPECT_TRUE(!sel("=mlx5_1", "mlx5_10", 1));
	EXPECT_TRUE(sel("=mlx5_1", "mlx5_1", 1));
	/* ports */
	EXPECT_TRUE(sel("=mlx5_0:1", "mlx5_0", 1));
	EXPECT_TRUE(!sel("=mlx5_0:2", "mlx5_0", 1));
	EXPECT_TRUE(sel("=mlx5_0:2", "mlx5_0", -1)); /* matchPort: -1 matches any */
	/* exclusion */
	EXPECT_TRUE(!sel("^mlx5_1", "mlx5_10", 1));
	EXPECT_TRUE(sel("^=mlx5_1", "mlx5_10", 1));
	EXPECT_TRUE(!sel("^=mlx5_1", "mlx5_1", 1));
	EXPECT_TRUE(!sel("^mlx5", "mlx5_0", 1));
	/* "^" alone: NCCL's empty list matches everything, so it excludes everything */
	EXPECT_TRUE(!sel("^", "mlx5_0", 1));
	EXPECT_TRUE(!sel("^,", "mlx5_0", 1));
	/* interfaces */
	EXPECT_TRUE(sel("eth", "eth0", -1));
	EXPECT_TRUE(!sel("=eth", "eth0", -1));
	EXPECT_TRUE(!sel("^eth,lo", "eth0", -1));
	EXPECT_TRUE(!sel("^eth,lo", "lo", -1));
	EXPECT_TRUE(sel("^eth,lo", "net1", -1));
}

#define S(x) x, sizeof(x) - 1

static void test_limits(void)
{
	static const char lim[] =
		"Limit                     Soft Limit           Hard Limit           Units     \n"
		"Max cpu time              unlimited            unlimited            seconds   \n"
		"Max locked memory         65536                unlimited            bytes     \n"
		"Max nice priority         0                    0                    \n";
	static const char unl[] =
		"Max locked memory         unlimited            unlimited            bytes     \n";
	uint64_t s = 0, h = 0;

	EXPECT_EQ(rdp_proc_limits_memlock(S(lim), &s, &h), 0);
	EXPECT_EQ(s, 65536);
	EXPECT_EQ(h, RDP_RLIM_UNLIMITED);
	EXPECT_EQ(rdp_proc_limits_memlock(S(unl), &s, &h), 0);
	EXPECT_EQ(s, RDP_RLIM_UNLIMITED);
	EXPECT_EQ(rdp_proc_limits_memlock(S("Max locked memoryX 1 2\n"), &s, &h), -ENOENT);
	EXPECT_EQ(rdp_proc_limits_memlock(S("Max locked memory  1\n"), &s, &h), -EBADMSG);
	EXPECT_EQ(rdp_proc_limits_memlock(S("Max locked memory  -1 2\n"), &s, &h), -EBADMSG);
	EXPECT_EQ(rdp_proc_limits_memlock(S("Max locked memory  99999999999999999999999 2\n"), &s,
					  &h),
		  -EBADMSG);
	EXPECT_EQ(rdp_proc_limits_memlock(S(""), &s, &h), -ENOENT);
	EXPECT_EQ(rdp_proc_limits_memlock(S("\0Max locked memory 1 1\n"), &s, &h), -ENOENT);
}

static void test_status(void)
{
	uint64_t c = 0;

	EXPECT_EQ(rdp_proc_status_capeff(S("Name:\tx\nCapPrm:\t1\nCapEff:\t00000000a80465fb\n"),
					 &c),
		  0);
	EXPECT_EQ(c, 0xa80465fbull);
	EXPECT_TRUE(c & (1ull << RDP_CAP_IPC_LOCK));
	EXPECT_EQ(rdp_proc_status_capeff(S("CapEff:\t00000000a80425fb\n"), &c), 0);
	EXPECT_TRUE(!(c & (1ull << RDP_CAP_IPC_LOCK)));
	EXPECT_EQ(rdp_proc_status_capeff(S("CapEff:\tzz\n"), &c), -EBADMSG);
	EXPECT_EQ(rdp_proc_status_capeff(S("CapEff:\t1ffffffffffffffffff\n"), &c), -EBADMSG);
	EXPECT_EQ(rdp_proc_status_capeff(S("CapBnd:\t0\n"), &c), -ENOENT);
}

static void test_mountinfo(void)
{
	static const char mi[] =
		"1450 1280 0:312 / / rw,relatime master:540 - overlay overlay rw,lowerdir=/a\n"
		"1452 1450 0:316 / /dev rw,nosuid - tmpfs tmpfs rw,size=65536k,mode=755\n"
		"1459 1452 0:310 / /dev/shm rw,nosuid master:541 - tmpfs shm rw,size=65536k\n"
		"1460 1452 0:320 / /dev/shmx rw - tmpfs x rw,size=1k\n"
		"garbage line\n"
		"1 2 3\n";
	static const char stacked[] =
		"1 0 0:1 / / rw - ext4 /dev/sda rw\n"
		"2 1 0:2 / /dev/shm rw - tmpfs shm rw,size=65536k\n"
		"3 1 0:3 / /dev/shm rw - tmpfs tmpfs rw,size=1048576k\n";
	static const char esc[] = "1 0 0:1 / /dev/my\\040shm rw - tmpfs t rw,size=2g\n";
	struct rdp_mount m;

	EXPECT_EQ(rdp_mountinfo_find(S(mi), "/dev/shm", &m), 0);
	EXPECT_STREQ(m.mount_point, "/dev/shm");
	EXPECT_STREQ(m.fstype, "tmpfs");
	EXPECT_EQ(m.size, 64ull << 20);
	EXPECT_EQ(rdp_mountinfo_find(S(mi), "/dev/shmy", &m), 0);
	EXPECT_STREQ(m.mount_point, "/dev");
	EXPECT_EQ(rdp_mountinfo_find(S(mi), "/etc/hosts", &m), 0);
	EXPECT_STREQ(m.mount_point, "/");
	EXPECT_STREQ(m.fstype, "overlay");
	EXPECT_EQ(m.size, 0);
	EXPECT_EQ(rdp_mountinfo_find(S(stacked), "/dev/shm", &m), 0);
	EXPECT_EQ(m.size, 1ull << 30);
	EXPECT_EQ(rdp_mountinfo_find(S(esc), "/dev/my shm", &m), 0);
	EXPECT_EQ(m.size, 2ull << 30);
	EXPECT_EQ(rdp_mountinfo_find(S("no separator here\n"), "/", &m), -ENOENT);
	EXPECT_EQ(rdp_mountinfo_find(S(""), "/", &m), -ENOENT);
}

static void test_environ(void)
{
	static const char env[] = "PATH=/bin\0NCCL_IB_HCA==mlx5_0:1\0NCCL_IB_HCA=second\0"
				  "RDMA_DEVICE_A=mlx5_0:1\0RDMA_DEVICE_B=mlx5_3:1,mlx5_4:1\0"
				  "EMPTY=\0LAST=nonul";
	char v[16];

	EXPECT_EQ(rdp_environ_get(env, sizeof(env) - 1, "NCCL_IB_HCA", v, sizeof(v)), 9);
	EXPECT_STREQ(v, "=mlx5_0:1");
	EXPECT_EQ(rdp_environ_get(env, sizeof(env) - 1, "NCCL_IB", v, sizeof(v)), -ENOENT);
	EXPECT_EQ(rdp_environ_get(env, sizeof(env) - 1, "EMPTY", v, sizeof(v)), 0);
	EXPECT_STREQ(v, "");
	EXPECT_EQ(rdp_environ_get(env, sizeof(env) - 1, "LAST", v, sizeof(v)), 5);
	EXPECT_STREQ(v, "nonul");
	EXPECT_EQ(rdp_environ_get(env, sizeof(env) - 1, "RDMA_DEVICE_B", v, 4), 17);
	EXPECT_STREQ(v, "mlx");
	EXPECT_EQ(rdp_environ_each_prefix(env, sizeof(env) - 1, "RDMA_DEVICE_", NULL, NULL), 2);
	EXPECT_EQ(rdp_environ_get("", 0, "X", v, sizeof(v)), -ENOENT);
}

static void test_net_dev(void)
{
	static const char nd[] =
		"Inter-|   Receive                                                |  Transmit\n"
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes\n"
		"    lo:    1000      10    0    0    0     0          0         0     2000\n"
		"  eth0:    2000      20    0    0    0     0          0         0     4000\n"
		"net1-very-long-interface-name-beyond-ifnamsiz: 1\n"
		"no colon here\n";
	char names[4][RDP_NCCL_NAME_MAX];

	EXPECT_EQ(rdp_proc_net_dev_names(S(nd), names, 4), 3);
	EXPECT_STREQ(names[0], "lo");
	EXPECT_STREQ(names[1], "eth0");
	EXPECT_EQ(rdp_proc_net_dev_names(S(nd), names, 1), 3);
	EXPECT_EQ(rdp_proc_net_dev_names(S(""), names, 4), 0);
}

int main(void)
{
	test_nccl_parse();
	test_nccl_match();
	test_limits();
	test_status();
	test_mountinfo();
	test_environ();
	test_net_dev();
	return test_summary("test-doctor-pod");
}
