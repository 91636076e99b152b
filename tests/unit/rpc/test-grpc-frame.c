/* SPDX-License-Identifier: MIT */
/* gRPC framing without a connection: prefix, reassembly, grpc-message and grpc-timeout. */
#include <errno.h>
#include <string.h>

#include "grpc-frame.h"
#include "macro.h"
#include "test.h"

struct got {
	unsigned n;
	size_t lens[16];
	char first[64];
	char last[64];
};

static int on_msg(uint8_t *msg, size_t len, void *userdata)
{
	struct got *g = userdata;

	if (g->n < ARRAY_SIZE(g->lens))
		g->lens[g->n] = len;
	if (g->n == 0)
		snprintf(g->first, sizeof(g->first), "%.*s", (int)(len < 63 ? len : 63),
			 msg ? (const char *)msg : "");
	snprintf(g->last, sizeof(g->last), "%.*s", (int)(len < 63 ? len : 63),
		 msg ? (const char *)msg : "");
	g->n++;
	rdp_free(msg);
	return 0;
}

static size_t build(uint8_t *out, const char *const *msgs, size_t n)
{
	size_t off = 0, i;

	for (i = 0; i < n; i++) {
		size_t l = strlen(msgs[i]);

		rdp_grpc_prefix(out + off, l);
		memcpy(out + off + RDP_GRPC_PREFIX_LEN, msgs[i], l);
		off += RDP_GRPC_PREFIX_LEN + l;
	}
	return off;
}

static void test_reader(void)
{
	static const char *const msgs[] = { "hello", "", "world!" };
	struct rdp_grpc_reader r;
	uint8_t buf[256];
	size_t len = build(buf, msgs, 3), i, chunk;

	/* every chunk size from byte-by-byte to all at once: same three messages */
	for (chunk = 1; chunk <= len; chunk++) {
		struct got g = {};

		rdp_grpc_reader_init(&r, 100);
		for (i = 0; i < len; i += chunk)
			EXPECT_EQ(rdp_grpc_reader_feed(&r, buf + i, len - i < chunk ? len - i : chunk,
						       on_msg, &g), 0);
		EXPECT_EQ(g.n, 3);
		EXPECT_EQ(g.lens[0], 5);
		EXPECT_EQ(g.lens[1], 0);
		EXPECT_EQ(g.lens[2], 6);
		EXPECT_STREQ(g.first, "hello");
		EXPECT_STREQ(g.last, "world!");
		EXPECT_TRUE(!rdp_grpc_reader_partial(&r));
		rdp_grpc_reader_done(&r);
	}

	/* partial message */
	{
		struct got g = {};

		rdp_grpc_reader_init(&r, 100);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, buf, 7, on_msg, &g), 0);
		EXPECT_TRUE(rdp_grpc_reader_partial(&r));
		EXPECT_EQ(g.n, 0);
		rdp_grpc_reader_done(&r);
	}

	/* a declared length over the limit fails before any payload is buffered */
	{
		struct got g = {};
		uint8_t hdr[RDP_GRPC_PREFIX_LEN];

		rdp_grpc_reader_init(&r, 4u << 20);
		rdp_grpc_prefix(hdr, (4u << 20) + 1);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, hdr, sizeof(hdr), on_msg, &g), -EMSGSIZE);
		EXPECT_EQ(r.too_big, (4u << 20) + 1);
		EXPECT_TRUE(r.buf == NULL);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, buf, len, on_msg, &g), -EIO);
		rdp_grpc_reader_done(&r);
		/* exactly the limit is fine */
		rdp_grpc_reader_init(&r, 5);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, buf, 10, on_msg, &g), 0);
		EXPECT_EQ(g.n, 1);
		rdp_grpc_reader_done(&r);
	}

	/* the compressed flag (we never negotiate an encoding) and unknown flags */
	{
		struct got g = {};
		uint8_t m[] = { 1, 0, 0, 0, 1, 'x' };

		rdp_grpc_reader_init(&r, 100);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, m, sizeof(m), on_msg, &g), -EBADMSG);
		EXPECT_EQ(r.bad_flag, 1);
		EXPECT_EQ(g.n, 0);
		rdp_grpc_reader_done(&r);
		m[0] = 7;
		rdp_grpc_reader_init(&r, 100);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, m, sizeof(m), on_msg, &g), -EBADMSG);
		EXPECT_EQ(r.bad_flag, 7);
		rdp_grpc_reader_done(&r);
	}

	/* allocation failure while buffering a payload */
	{
		struct got g = {};

		rdp_grpc_reader_init(&r, 100);
		rdp_alloc_fail_at(1);
		EXPECT_EQ(rdp_grpc_reader_feed(&r, buf, len, on_msg, &g), -ENOMEM);
		rdp_alloc_fail_at(0);
		rdp_grpc_reader_done(&r);
	}
}

static void test_prefix(void)
{
	uint8_t p[RDP_GRPC_PREFIX_LEN];

	rdp_grpc_prefix(p, 0x01020304);
	EXPECT_EQ(p[0], 0);
	EXPECT_EQ(p[1], 1);
	EXPECT_EQ(p[2], 2);
	EXPECT_EQ(p[3], 3);
	EXPECT_EQ(p[4], 4);
}

static void test_percent(void)
{
	static const struct {
		const char *in, *out;
	} enc[] = {
		{ "", "" },
		{ "plain text", "plain text" },
		{ "100%", "100%25" },
		{ "a\nb\r\n", "a%0Ab%0D%0A" },
		{ "tab\there", "tab%09here" },
		{ "caf\xc3\xa9", "caf%C3%A9" },
		{ "~ and \x7f", "~ and %7F" },
		{ " !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}", " !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}" },
		{ "\x01\x1f", "%01%1F" },
	};
	static const struct {
		const char *in, *out;
	} dec[] = {
		{ "a%0Ab", "a\nb" },
		{ "100%25", "100%" },
		{ "caf%C3%a9", "caf\xc3\xa9" },
		{ "bad %zz and %4", "bad %zz and %4" },
		{ "%", "%" },
		{ "end%2", "end%2" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(enc); i++) {
		char *e = rdp_grpc_percent_encode(enc[i].in);
		char *d;

		EXPECT_STREQ(e, enc[i].out);
		d = rdp_grpc_percent_decode(e, strlen(e));
		EXPECT_STREQ(d, enc[i].in); /* round trip */
		rdp_free(e);
		rdp_free(d);
	}
	for (i = 0; i < ARRAY_SIZE(dec); i++) {
		char *d = rdp_grpc_percent_decode(dec[i].in, strlen(dec[i].in));

		EXPECT_STREQ(d, dec[i].out);
		rdp_free(d);
	}
	/* every byte 1..255 round-trips and the encoding only has printable ASCII */
	{
		char all[256], *e, *d;

		for (i = 1; i < 256; i++)
			all[i - 1] = (char)i;
		all[255] = '\0';
		e = rdp_grpc_percent_encode(all);
		for (i = 0; e && e[i]; i++)
			EXPECT_TRUE(e[i] >= 0x20 && e[i] <= 0x7e);
		d = e ? rdp_grpc_percent_decode(e, strlen(e)) : NULL;
		EXPECT_STREQ(d, all);
		rdp_free(e);
		rdp_free(d);
	}
	rdp_alloc_fail_at(1);
	EXPECT_TRUE(rdp_grpc_percent_encode("x") == NULL);
	rdp_alloc_fail_at(1);
	EXPECT_TRUE(rdp_grpc_percent_decode("x", 1) == NULL);
	rdp_alloc_fail_at(0);
}

static void test_timeout(void)
{
	static const struct {
		const char *in;
		int ret;
		uint64_t usec;
	} t[] = {
		{ "1H", 0, 3600000000ULL },
		{ "2M", 0, 120000000ULL },
		{ "30S", 0, 30000000ULL },
		{ "100m", 0, 100000ULL },
		{ "29999871u", 0, 29999871ULL }, /* grpc-go's 30 s deadline */
		{ "2999987u", 0, 2999987ULL },
		{ "99999999u", 0, 99999999ULL },
		{ "999999999u", -EINVAL, 0 },
		{ "1n", 0, 1 },
		{ "1000n", 0, 1 },
		{ "1001n", 0, 2 },
		{ "0S", 0, 0 },
		{ "99999999H", 0, 99999999ULL * 3600000000ULL },
		{ "", -EINVAL, 0 },
		{ "S", -EINVAL, 0 },
		{ "10", -EINVAL, 0 },
		{ "10s", -EINVAL, 0 },
		{ "10 S", -EINVAL, 0 },
		{ "-1S", -EINVAL, 0 },
		{ "+1S", -EINVAL, 0 },
		{ "1.5S", -EINVAL, 0 },
		{ "10SS", -EINVAL, 0 },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(t); i++) {
		uint64_t usec = 12345;
		int r = rdp_grpc_timeout_parse(t[i].in, strlen(t[i].in), &usec);

		if (r != t[i].ret)
			fprintf(stderr, "timeout case \"%s\"\n", t[i].in);
		EXPECT_EQ(r, t[i].ret);
		if (r == 0)
			EXPECT_EQ(usec, t[i].usec);
		else
			EXPECT_EQ(usec, 12345); /* untouched on failure */
	}
}

static void test_timeout_format(void)
{
	static const struct {
		uint64_t usec;
		const char *out;
	} t[] = {
		{ 1, "1u" },
		{ 30000000, "30000000u" },
		{ 99999999, "99999999u" },
		{ 100000000, "100000m" },
		{ 100000000000ULL, "100000S" },
		{ 100000000000000ULL, "1666667M" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(t); i++) {
		char buf[16];
		uint64_t back;

		rdp_grpc_timeout_format(t[i].usec, buf);
		EXPECT_STREQ(buf, t[i].out);
		EXPECT_EQ(rdp_grpc_timeout_parse(buf, strlen(buf), &back), 0);
		EXPECT_TRUE(back >= t[i].usec); /* never shorter than asked */
	}
}

int main(void)
{
	test_prefix();
	test_reader();
	test_percent();
	test_timeout();
	test_timeout_format();
	return test_summary("test-grpc-frame");
}
