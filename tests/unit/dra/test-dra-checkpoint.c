/* SPDX-License-Identifier: MIT */
/* dra-checkpoint: lifecycle, round trip through a file, strict loading, bounds, failmalloc. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "dra-checkpoint.h"
#include "macro.h"
#include "test.h"

static char id0[] = "rdma-dp.io/claim=u1-pci-0000-18-00-0";
static char *ids_a[] = {id0};
static char nic[] = "nic", pool[] = "node-a", d18[] = "pci-0000-18-00-0", d19[] = "pci-0000-19-00-0";
static char ns[] = "ns", c1[] = "c1", spec[] = "/var/run/cdi/rdma-dp.io-claim_u1.json";
static struct rdp_dra_ckpt_device devs_a[] = {
	{nic, pool, d18, ids_a, 1, false, NULL},
	{nic, pool, d19, NULL, 0, false, NULL},
};

static struct rdp_dra_ckpt_claim claim(const char *uid, enum rdp_dra_claim_state st)
{
	return (struct rdp_dra_ckpt_claim){
		.uid = (char *)uid, .namespace = ns, .name = c1, .state = st,
		.devices = devs_a, .n_devices = 2,
		.cdi_spec = spec};
}

static void test_states(void)
{
	enum rdp_dra_claim_state s;

	EXPECT_STREQ(rdp_dra_claim_state_name(RDP_DRA_PREPARE_STARTED), "prepare-started");
	EXPECT_STREQ(rdp_dra_claim_state_name(RDP_DRA_PREPARED), "prepared");
	EXPECT_EQ(rdp_dra_claim_state_from_name("prepared", &s), 0);
	EXPECT_EQ(s, RDP_DRA_PREPARED);
	EXPECT_EQ(rdp_dra_claim_state_from_name("done", &s), -EINVAL);
	EXPECT_TRUE(rdp_dra_claim_state_next(false, 0, RDP_DRA_PREPARE_STARTED));
	EXPECT_TRUE(!rdp_dra_claim_state_next(false, 0, RDP_DRA_PREPARED));
	EXPECT_TRUE(rdp_dra_claim_state_next(true, RDP_DRA_PREPARE_STARTED, RDP_DRA_PREPARED));
	EXPECT_TRUE(rdp_dra_claim_state_next(true, RDP_DRA_PREPARE_STARTED,
					     RDP_DRA_PREPARE_STARTED));
	EXPECT_TRUE(rdp_dra_claim_state_next(true, RDP_DRA_PREPARED, RDP_DRA_PREPARED));
	EXPECT_TRUE(!rdp_dra_claim_state_next(true, RDP_DRA_PREPARED, RDP_DRA_PREPARE_STARTED));
}

static void test_memory(void)
{
	struct rdp_dra_checkpoint c = {0};
	struct rdp_dra_ckpt_claim cl;

	cl = claim("u2", RDP_DRA_PREPARED);
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), -EINVAL); /* absent -> prepared */
	cl.state = RDP_DRA_PREPARE_STARTED;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	cl = claim("u1", RDP_DRA_PREPARE_STARTED);
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	cl = claim("u3", RDP_DRA_PREPARE_STARTED);
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	EXPECT_EQ(c.n_claims, 3);
	EXPECT_STREQ(c.claims[0].uid, "u1");
	EXPECT_STREQ(c.claims[2].uid, "u3");
	cl = claim("u2", RDP_DRA_PREPARED);
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	EXPECT_EQ(rdp_dra_checkpoint_find(&c, "u2")->state, RDP_DRA_PREPARED);
	EXPECT_EQ(rdp_dra_checkpoint_find(&c, "u2")->n_devices, 2);
	EXPECT_STREQ(rdp_dra_checkpoint_find(&c, "u2")->devices[0].cdi_ids[0], ids_a[0]);
	cl.state = RDP_DRA_PREPARE_STARTED;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), -EINVAL);
	EXPECT_TRUE(rdp_dra_checkpoint_find(&c, "u9") == NULL);
	EXPECT_EQ(rdp_dra_checkpoint_remove(&c, "u2"), 0);
	EXPECT_EQ(rdp_dra_checkpoint_remove(&c, "u2"), 1);
	EXPECT_EQ(c.n_claims, 2);
	EXPECT_STREQ(c.claims[1].uid, "u3");
	cl.uid = NULL;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), -EINVAL);
	cl.uid = (char *)(uintptr_t)"";
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), -EINVAL);
	rdp_dra_checkpoint_done(&c);
	/* the claim bound */
	for (int i = 0; i < RDP_DRA_CKPT_MAX_CLAIMS; i++) {
		char uid[32];

		snprintf(uid, sizeof(uid), "%08d", i);
		cl = claim(uid, RDP_DRA_PREPARE_STARTED);
		cl.n_devices = 0;
		if (rdp_dra_checkpoint_put(&c, &cl) != 0)
			break;
	}
	EXPECT_EQ(c.n_claims, RDP_DRA_CKPT_MAX_CLAIMS);
	cl = claim("x", RDP_DRA_PREPARE_STARTED);
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), -E2BIG);
	/* a full checkpoint still renders under the byte bound */
	char *text = NULL;
	EXPECT_EQ(rdp_dra_checkpoint_render(&c, &text), 0);
	rdp_free(text);
	rdp_dra_checkpoint_done(&c);
}

static int tmpdir(char *path, size_t len)
{
	snprintf(path, len, "/tmp/test-dra-checkpoint.XXXXXX");
	if (!mkdtemp(path))
		return -1;
	return open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void write_file(int dfd, const char *name, const char *text)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd >= 0) {
		EXPECT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
		close(fd);
	}
}

static void test_files(void)
{
	struct rdp_dra_checkpoint c = {0}, back = {0};
	struct rdp_dra_ckpt_claim cl = claim("u1", RDP_DRA_PREPARE_STARTED);
	char dir[64], *err = NULL, *t1 = NULL, *t2 = NULL;
	int dfd = tmpdir(dir, sizeof(dir));
	struct stat st;

	EXPECT_TRUE(dfd >= 0);
	/* missing file: empty */
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), 0);
	EXPECT_EQ(back.n_claims, 0);
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	cl = claim("u0", RDP_DRA_PREPARE_STARTED);
	cl.n_devices = 0;
	cl.namespace = NULL;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	cl.state = RDP_DRA_PREPARED;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	EXPECT_EQ(rdp_dra_checkpoint_save_at(dfd, &c), 0);
	EXPECT_EQ(fstatat(dfd, RDP_DRA_CKPT_FILE, &st, 0), 0);
	EXPECT_EQ(st.st_mode & 0777, 0600);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), 0);
	EXPECT_EQ(back.n_claims, 2);
	EXPECT_EQ(rdp_dra_checkpoint_render(&c, &t1), 0);
	EXPECT_EQ(rdp_dra_checkpoint_render(&back, &t2), 0);
	EXPECT_STREQ(t1, t2);
	EXPECT_CONTAINS(t1, "\"state\": \"prepare-started\"");
	EXPECT_CONTAINS(t1, "\"cdi_ids\": [\n");
	EXPECT_EQ(rdp_dra_checkpoint_find(&back, "u0")->state, RDP_DRA_PREPARED);
	EXPECT_STREQ(rdp_dra_checkpoint_find(&back, "u0")->namespace, "");
	rdp_free(t2);
	t2 = NULL;
	/* no temporary file left */
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fdopendir(fd);
	struct dirent *de;
	int files = 0;
	while ((de = readdir(d)))
		files += de->d_name[0] != '.' || strstr(de->d_name, ".tmp") != NULL;
	closedir(d);
	EXPECT_EQ(files, 1);

	/* corrupt files: an error with a reason, ret untouched; then set aside */
	static const struct {
		const char *text, *why;
		int err;
	} bad[] = {
		{"", "not JSON", -EBADMSG},
		{"{\"version\":1,\"claims\":{}", "not JSON", -EBADMSG},
		{"[]", "not a checkpoint", -EBADMSG},
		{"{\"version\":2,\"claims\":{}}", "version 2", -EBADMSG},
		{"{\"version\":1,\"claims\":{},\"x\":1}", "not a checkpoint", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":{}}}", "unknown or missing", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":{\"namespace\":\"n\",\"name\":\"c\","
		 "\"state\":\"done\",\"devices\":[],\"cdi_spec\":\"\"}}}", "not valid", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":{\"namespace\":\"n\",\"name\":\"c\","
		 "\"state\":\"prepared\",\"devices\":[{}],\"cdi_spec\":\"\"}}}", "device 0",
		 -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":{\"namespace\":\"n\",\"name\":\"c\","
		 "\"state\":\"prepared\",\"devices\":[{\"request\":\"r\",\"pool\":\"p\","
		 "\"device\":\"d\",\"cdi_ids\":[1]}],\"cdi_spec\":\"\"}}}", "CDI ID", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":{\"namespace\":\"n\",\"name\":\"c\","
		 "\"state\":\"prepared\",\"devices\":[],\"cdi_spec\":\"\",\"extra\":0}}}",
		 "unknown or missing", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":{\"namespace\":\"n\",\"name\":\"c\","
		 "\"state\":\"prepared\",\"devices\":[{\"request\":\"r\",\"pool\":\"p\","
		 "\"device\":\"d\",\"cdi_ids\":[],\"admin_access\":1}],\"cdi_spec\":\"\"}}}",
		 "admin_access is not a boolean", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"u\":1,\"u\":2}}", "not JSON", -EBADMSG},
		{"{\"version\":1,\"claims\":{\"\":{\"namespace\":\"n\",\"name\":\"c\","
		 "\"state\":\"prepared\",\"devices\":[],\"cdi_spec\":\"\"}}}", "UID", -EBADMSG},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		write_file(dfd, RDP_DRA_CKPT_FILE, bad[i].text);
		EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), bad[i].err);
		EXPECT_CONTAINS(err, bad[i].why);
		EXPECT_EQ(back.n_claims, 2);
		rdp_free(err);
		err = NULL;
	}
	EXPECT_EQ(rdp_dra_checkpoint_set_aside_at(dfd), 0);
	EXPECT_EQ(fstatat(dfd, RDP_DRA_CKPT_CORRUPT, &st, 0), 0);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), 0);
	EXPECT_EQ(back.n_claims, 0);
	/* too large; a directory; a symlink */
	size_t big = RDP_DRA_CKPT_MAX_BYTES + 10;
	char *b = rdp_malloc(big + 1);
	memset(b, ' ', big);
	b[big] = 0;
	write_file(dfd, RDP_DRA_CKPT_FILE, b);
	rdp_free(b);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), -E2BIG);
	EXPECT_CONTAINS(err, "larger than");
	rdp_free(err);
	unlinkat(dfd, RDP_DRA_CKPT_FILE, 0);
	EXPECT_EQ(mkdirat(dfd, RDP_DRA_CKPT_FILE, 0700), 0);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), -EBADMSG);
	EXPECT_CONTAINS(err, "not a regular file");
	rdp_free(err);
	unlinkat(dfd, RDP_DRA_CKPT_FILE, AT_REMOVEDIR);
	EXPECT_EQ(symlinkat("/etc/passwd", dfd, RDP_DRA_CKPT_FILE), 0);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), -EBADMSG);
	rdp_free(err);
	err = NULL;
	/* save replaces the symlink itself, not its target */
	EXPECT_EQ(rdp_dra_checkpoint_save_at(dfd, &c), 0);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), 0);
	EXPECT_EQ(back.n_claims, 2);

	/* failmalloc: load and save fail cleanly or succeed */
	rdp_alloc_fail_at(0);
	rdp_dra_checkpoint_done(&back);
	EXPECT_EQ(rdp_dra_checkpoint_load_at(dfd, &back, &err), 0);
	unsigned long total = rdp_alloc_count();
	for (unsigned long k = 1; k <= total + 1; k++) {
		struct rdp_dra_checkpoint x = {0};
		int r;

		rdp_alloc_fail_at(k);
		r = rdp_dra_checkpoint_load_at(dfd, &x, &err);
		rdp_alloc_fail_at(0);
		EXPECT_TRUE(r == 0 || r == -ENOMEM);
		EXPECT_TRUE(r == 0 ? x.n_claims == 2 : x.n_claims == 0);
		rdp_free(err);
		err = NULL;
		rdp_dra_checkpoint_done(&x);
	}
	for (unsigned long k = 1; k <= 40; k++) {
		struct rdp_dra_checkpoint x = {0};
		struct rdp_dra_ckpt_claim y = claim("u7", RDP_DRA_PREPARE_STARTED);
		int r;

		rdp_alloc_fail_at(k);
		r = rdp_dra_checkpoint_put(&x, &y);
		rdp_alloc_fail_at(0);
		EXPECT_TRUE(r == 0 || r == -ENOMEM);
		EXPECT_EQ(x.n_claims, r == 0 ? 1 : 0);
		rdp_dra_checkpoint_done(&x);
	}

	rdp_free(t1);
	rdp_dra_checkpoint_done(&c);
	rdp_dra_checkpoint_done(&back);
	unlinkat(dfd, RDP_DRA_CKPT_FILE, 0);
	unlinkat(dfd, RDP_DRA_CKPT_CORRUPT, 0);
	close(dfd);
	EXPECT_EQ(rmdir(dir), 0);
}

/* An admin-access device is recorded as "admin_access": true and read back; a workload
 * device carries no such key (the files of older versions load unchanged). */
static void test_admin_access(void)
{
	struct rdp_dra_checkpoint c = {0}, back = {0};
	struct rdp_dra_ckpt_device devs[2] = {
		{.request = nic, .pool = pool, .device = d18, .cdi_ids = ids_a, .n_cdi_ids = 1,
		 .admin_access = true},
		{.request = nic, .pool = pool, .device = d19},
	};
	struct rdp_dra_ckpt_claim cl = claim("u1", RDP_DRA_PREPARE_STARTED);
	char *t = NULL, *err = NULL;

	cl.devices = devs;
	cl.n_devices = 2;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	cl.state = RDP_DRA_PREPARED;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	EXPECT_EQ(rdp_dra_checkpoint_render(&c, &t), 0);
	EXPECT_CONTAINS(t, "\"admin_access\": true");
	EXPECT_TRUE(strstr(t, "\"admin_access\": false") == NULL);
	EXPECT_EQ(rdp_dra_checkpoint_parse(t, strlen(t), &back, &err), 0);
	EXPECT_EQ(back.n_claims, 1);
	if (back.n_claims == 1 && back.claims[0].n_devices == 2) {
		EXPECT_TRUE(back.claims[0].devices[0].admin_access);
		EXPECT_TRUE(!back.claims[0].devices[1].admin_access);
	}
	rdp_free(t);
	rdp_dra_checkpoint_done(&c);
	rdp_dra_checkpoint_done(&back);
}

int main(void)
{
	test_admin_access();
	test_states();
	test_memory();
	test_files();
	return test_summary("test-dra-checkpoint");
}
