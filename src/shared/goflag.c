/* SPDX-License-Identifier: MIT */
/* Go's `flag` syntax (goflag.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "errmsg.h"
#include "goflag.h"

int rdp_goflag_parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcmp(s, yes[i]) == 0) {
			*ret = true;
			return 0;
		}
		if (strcmp(s, no[i]) == 0) {
			*ret = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* Go's %q of an ASCII string into buf (size >= 1): always terminated, cut when too long. */
static const char *goquote(const char *s, size_t len, char *buf, size_t size)
{
	size_t o = 0;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		int _n = snprintf(buf + o, size - o, __VA_ARGS__);                                 \
		if (_n < 0 || (size_t)_n >= size - o)                                              \
			return buf;                                                                \
		o += (size_t)_n;                                                                   \
	} while (0)

	buf[0] = '\0';
	PUT("\"");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;

		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\a': esc = "\\a"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		case '\v': esc = "\\v"; break;
		default: break;
		}
		if (esc)
			PUT("%s", esc);
		else if (c < 0x20 || c >= 0x7f)
			PUT("\\x%02x", c);
		else
			PUT("%c", c);
	}
	PUT("\"");
#undef PUT
	return buf;
}

int rdp_goflag_parse(const struct rdp_goflag *flags, size_t n, int argc, char *const *argv,
		     char *err, size_t errlen)
{
	int i = 1;

	while (i < argc) {
		const char *s = argv[i], *name, *eq, *value = NULL;
		const struct rdp_goflag *f = NULL;
		size_t namelen;
		char q[256];

		if (strlen(s) < 2 || s[0] != '-')
			return i;
		name = s + 1;
		if (s[1] == '-') {
			if (s[2] == '\0')
				return i + 1; /* "--" ends the flags */
			name = s + 2;
		}
		if (name[0] == '-' || name[0] == '=')
			return rdp_errmsg(err, errlen, -EINVAL, "bad flag syntax: %s", s);
		i++;
		/* The value starts after the first '=' past the name's first byte. */
		eq = strchr(name + 1, '=');
		namelen = eq ? (size_t)(eq - name) : strlen(name);
		if (eq)
			value = eq + 1;
		for (size_t k = 0; k < n; k++)
			if (strlen(flags[k].name) == namelen &&
			    memcmp(flags[k].name, name, namelen) == 0) {
				f = &flags[k];
				break;
			}
		if (!f) {
			if ((namelen == 1 && name[0] == 'h') ||
			    (namelen == 4 && memcmp(name, "help", 4) == 0))
				return 0;
			return rdp_errmsg(err, errlen, -EINVAL,
					  "flag provided but not defined: -%.*s", (int)namelen,
					  name);
		}
		if (f->type == RDP_GOFLAG_BOOL) {
			bool b = true;

			if (value && rdp_goflag_parse_bool(value, &b) < 0)
				return rdp_errmsg(err, errlen, -EINVAL,
						  "invalid boolean value %s for -%.*s: parse error",
						  goquote(value, strlen(value), q, sizeof(q)),
						  (int)namelen, name);
			*(bool *)f->value = b;
			continue;
		}
		if (!value && i < argc)
			value = argv[i++];
		if (!value)
			return rdp_errmsg(err, errlen, -EINVAL, "flag needs an argument: -%.*s",
					  (int)namelen, name);
		*(const char **)f->value = value;
	}
	return i;
}
