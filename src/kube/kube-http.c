/* SPDX-License-Identifier: MIT */
/* HTTP/1.1 requests and responses of the API-server client; see kube-http.h. */
#define _GNU_SOURCE
#include "kube-http.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <http_parser.h>

#include "macro.h"

#define FIELD_MAX 32 /* longer header names are none we look at */
#define VALUE_MAX 32

struct rdp_kube_http_parser {
	http_parser parser;
	size_t max_body;
	size_t header_bytes;
	bool started, complete, keep_alive, extra;
	int error; /* set by a callback or the last feed: returned again */
	/* the header being read: its name (lower-cased, truncated) and its value */
	char field[FIELD_MAX + 1], value[VALUE_MAX + 1];
	size_t field_len, value_len;
	bool in_value, field_long, value_long;
	struct rdp_kube_response resp;
	size_t body_cap;
	/* stream mode: a 2xx body goes to stream() as it comes, not into resp.body */
	rdp_kube_http_stream_cb stream;
	void *stream_ud;
	bool stopped;
};

const char *rdp_kube_method_name(enum rdp_kube_method m)
{
	switch (m) {
	case RDP_KUBE_GET:
		return "GET";
	case RDP_KUBE_POST:
		return "POST";
	case RDP_KUBE_PUT:
		return "PUT";
	case RDP_KUBE_PATCH:
		return "PATCH";
	case RDP_KUBE_DELETE:
		return "DELETE";
	case RDP_KUBE_APPLY:
		return "PATCH";
	}
	return NULL;
}

void rdp_kube_response_done(struct rdp_kube_response *resp)
{
	rdp_free(resp->body);
	*resp = (struct rdp_kube_response){.retry_after = -1};
}

/* Printable ASCII without space: what a path or a token may hold. */
static bool plain(const char *s, size_t max)
{
	size_t n = 0;

	for (; *s; s++, n++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || n >= max)
			return false;
	return true;
}

int rdp_kube_http_render(enum rdp_kube_method m, const char *host, const char *path,
			 const char *token, const char *body, char **ret, size_t *ret_len)
{
	const char *name = rdp_kube_method_name(m);
	_cleanup_free_ char *auth = NULL, *content = NULL;
	char *s;

	if (!name || !path || path[0] != '/' || !plain(path, RDP_KUBE_HTTP_PATH_MAX) ||
	    !plain(host, 256) || (token && (!*token || !plain(token, SIZE_MAX))))
		return -EINVAL;
	auth = token ? rdp_asprintf("Authorization: Bearer %s\r\n", token) : rdp_strdup("");
	if (!auth)
		return -ENOMEM;
	content = body ? rdp_asprintf("Content-Type: %s\r\nContent-Length: %zu\r\n",
				      m == RDP_KUBE_PATCH   ? "application/merge-patch+json"
				      : m == RDP_KUBE_APPLY ? "application/apply-patch+yaml"
							    : "application/json",
				      strlen(body))
		       : rdp_strdup(m == RDP_KUBE_GET ? "" : "Content-Length: 0\r\n");
	if (!content)
		return -ENOMEM;
	s = rdp_asprintf("%s %s HTTP/1.1\r\n"
			 "Host: %s\r\n"
			 "User-Agent: rdma-dp/" RDP_VERSION "\r\n"
			 "%s"
			 "Accept: application/json\r\n"
			 "%s"
			 "\r\n"
			 "%s",
			 name, path, host, auth, content, strempty(body));
	if (!s)
		return -ENOMEM;
	*ret_len = strlen(s);
	*ret = s;
	return 0;
}

static struct rdp_kube_http_parser *parser_of(http_parser *hp)
{
	return hp->data;
}

/* The end of one header line: keep what we look at. */
static void header_done(struct rdp_kube_http_parser *p)
{
	if (!p->field_long && !p->value_long && strcmp(p->field, "retry-after") == 0) {
		const char *v = p->value;
		long long n = 0;

		while (*v == ' ' || *v == '\t')
			v++;
		if (*v >= '0' && *v <= '9') {
			for (; *v >= '0' && *v <= '9'; v++)
				if (n <= RDP_KUBE_RETRY_AFTER_MAX)
					n = n * 10 + (*v - '0');
			while (*v == ' ' || *v == '\t')
				v++;
			if (!*v)
				p->resp.retry_after = n > RDP_KUBE_RETRY_AFTER_MAX
							      ? RDP_KUBE_RETRY_AFTER_MAX
							      : (int)n;
		}
		/* an HTTP-date is not taken: kube-apiserver sends seconds */
	}
	p->field_len = p->value_len = 0;
	p->field[0] = p->value[0] = '\0';
	p->field_long = p->value_long = false;
	p->in_value = false;
}

static int count_header(struct rdp_kube_http_parser *p, size_t len)
{
	p->header_bytes += len;
	if (p->header_bytes > RDP_KUBE_HTTP_HEADERS_MAX) {
		p->error = -E2BIG;
		return 1;
	}
	return 0;
}

static int on_header_field(http_parser *hp, const char *at, size_t len)
{
	struct rdp_kube_http_parser *p = parser_of(hp);

	if (count_header(p, len))
		return 1;
	if (p->in_value)
		header_done(p);
	for (size_t i = 0; i < len; i++) {
		if (p->field_len >= FIELD_MAX) {
			p->field_long = true;
			break;
		}
		p->field[p->field_len++] =
			(char)(at[i] >= 'A' && at[i] <= 'Z' ? at[i] + 32 : at[i]);
	}
	p->field[p->field_len] = '\0';
	return 0;
}

static int on_header_value(http_parser *hp, const char *at, size_t len)
{
	struct rdp_kube_http_parser *p = parser_of(hp);

	if (count_header(p, len))
		return 1;
	p->in_value = true;
	for (size_t i = 0; i < len; i++) {
		if (p->value_len >= VALUE_MAX) {
			p->value_long = true;
			break;
		}
		p->value[p->value_len++] = at[i];
	}
	p->value[p->value_len] = '\0';
	return 0;
}

static int on_headers_complete(http_parser *hp)
{
	struct rdp_kube_http_parser *p = parser_of(hp);

	if (p->in_value)
		header_done(p);
	p->resp.status = hp->status_code;
	if (hp->status_code < 200 || hp->status_code > 999) {
		/* 1xx: nothing here sends Expect or asks for an upgrade */
		p->error = -EPROTO;
		return -1;
	}
	if (hp->content_length != UINT64_MAX && hp->content_length > p->max_body) {
		p->error = -E2BIG;
		return -1;
	}
	return 0;
}

static int on_body(http_parser *hp, const char *at, size_t len)
{
	struct rdp_kube_http_parser *p = parser_of(hp);
	size_t need;

	if (p->stream && p->resp.status >= 200 && p->resp.status <= 299) {
		int r = p->stream(p->stream_ud, at, len);

		if (r < 0) {
			p->error = r;
			return 1;
		}
		if (r > 0) {
			/* the reader has what it wanted: the response ends here, unread */
			p->stopped = p->complete = true;
			http_parser_pause(hp, 1);
		}
		return 0;
	}

	if (len > p->max_body - p->resp.body_len) {
		p->error = -E2BIG;
		return 1;
	}
	need = p->resp.body_len + len + 1;
	if (need > p->body_cap) {
		size_t cap = p->body_cap ? p->body_cap : 4096;
		char *b;

		while (cap < need)
			cap *= 2;
		if (cap > p->max_body + 1)
			cap = p->max_body + 1;
		b = rdp_realloc(p->resp.body, cap);
		if (!b) {
			p->error = -ENOMEM;
			return 1;
		}
		p->resp.body = b;
		p->body_cap = cap;
	}
	memcpy(p->resp.body + p->resp.body_len, at, len);
	p->resp.body_len += len;
	p->resp.body[p->resp.body_len] = '\0';
	return 0;
}

static int on_message_complete(http_parser *hp)
{
	struct rdp_kube_http_parser *p = parser_of(hp);

	p->complete = true;
	p->keep_alive = http_should_keep_alive(hp);
	http_parser_pause(hp, 1);
	return 0;
}

static const http_parser_settings settings = {
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

int rdp_kube_http_parser_new(size_t max_body, struct rdp_kube_http_parser **ret)
{
	struct rdp_kube_http_parser *p = rdp_calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	http_parser_init(&p->parser, HTTP_RESPONSE);
	p->parser.data = p;
	p->max_body = max_body;
	p->resp.retry_after = -1;
	*ret = p;
	return 0;
}

void rdp_kube_http_parser_free(struct rdp_kube_http_parser *p)
{
	if (!p)
		return;
	rdp_kube_response_done(&p->resp);
	rdp_free(p);
}

int rdp_kube_http_parser_feed(struct rdp_kube_http_parser *p, const char *buf, size_t len)
{
	size_t n;

	if (p->error)
		return p->error;
	if (p->complete)
		return 1;
	if (len == 0) {
		/* the peer closed: completes a body read until the close, else truncates */
		if (p->started)
			http_parser_execute(&p->parser, &settings, NULL, 0);
		if (p->complete)
			return 1;
		p->error = p->error ? p->error : -EPROTO;
		return p->error;
	}
	p->started = true;
	n = http_parser_execute(&p->parser, &settings, buf, len);
	if (p->error)
		return p->error;
	if (p->complete) {
		p->extra = n < len || p->stopped;
		return 1;
	}
	if (HTTP_PARSER_ERRNO(&p->parser) != HPE_OK || n != len) {
		p->error = -EPROTO;
		return p->error;
	}
	return 0;
}

void rdp_kube_http_parser_set_stream(struct rdp_kube_http_parser *p, rdp_kube_http_stream_cb cb,
				     void *userdata)
{
	p->stream = cb;
	p->stream_ud = userdata;
}

bool rdp_kube_http_parser_started(const struct rdp_kube_http_parser *p)
{
	return p->started;
}

bool rdp_kube_http_parser_reusable(const struct rdp_kube_http_parser *p)
{
	return p->complete && !p->error && p->keep_alive && !p->extra;
}

int rdp_kube_http_parser_take(struct rdp_kube_http_parser *p, struct rdp_kube_response *ret)
{
	if (!p->resp.body) {
		p->resp.body = rdp_strdup("");
		if (!p->resp.body)
			return -ENOMEM;
	}
	*ret = p->resp;
	p->resp = (struct rdp_kube_response){.retry_after = -1};
	p->body_cap = 0;
	return 0;
}
