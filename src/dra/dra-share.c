/* SPDX-License-Identifier: MIT */
#include "dra-share.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int rdp_dra_sharing_parse(const char *s, enum rdp_dra_sharing *ret)
{
	if (s && strcmp(s, "claim") == 0)
		*ret = RDP_DRA_SHARING_CLAIM;
	else if (s && strcmp(s, "capacity") == 0)
		*ret = RDP_DRA_SHARING_CAPACITY;
	else
		return -EINVAL;
	return 0;
}

const char *rdp_dra_sharing_name(enum rdp_dra_sharing s)
{
	return s == RDP_DRA_SHARING_CAPACITY ? "capacity" : "claim";
}

/* {"value": v, "requestPolicy": {"default": def, "validRange": {"min": def}}} */
static json_t *capacity(const char *v, const char *def)
{
	return json_pack("{s:s, s:{s:s, s:{s:s}}}", "value", v, "requestPolicy", "default", def,
			 "validRange", "min", def);
}

int rdp_dra_share_device(json_t *dev, const struct rdp_dra_share_options *o)
{
	unsigned int slots = o->slots ? o->slots : RDP_DRA_SHARE_SLOTS_DEFAULT;
	json_t *rate, *cap;
	char buf[32];

	if (!json_is_object(dev) || slots > RDP_DRA_SHARE_SLOTS_MAX)
		return -EINVAL;
	if (o->sharing != RDP_DRA_SHARING_CAPACITY)
		return 0;
	cap = json_object_get(dev, "capacity");
	if (!cap) {
		cap = json_object();
		if (!cap || json_object_set_new(dev, "capacity", cap) < 0)
			return -ENOMEM;
	}
	if (!json_is_object(cap))
		return -EINVAL;
	if (json_object_set_new(dev, "allowMultipleAllocations", json_true()) < 0)
		return -ENOMEM;
	snprintf(buf, sizeof(buf), "%u", slots);
	if (json_object_set_new(cap, RDP_DRA_CAP_SLOTS, capacity(buf, "1")) < 0)
		return -ENOMEM;
	rate = json_object_get(json_object_get(json_object_get(dev, "attributes"), "rateGbps"),
			       "int");
	if (o->bandwidth && json_is_integer(rate) && json_integer_value(rate) > 0) {
		snprintf(buf, sizeof(buf), "%lldG", (long long)json_integer_value(rate));
		if (json_object_set_new(cap, RDP_DRA_CAP_BANDWIDTH, capacity(buf, "0")) < 0)
			return -ENOMEM;
	}
	return 0;
}

int rdp_dra_share_slices(json_t *slices, const struct rdp_dra_share_options *o)
{
	size_t i, j;
	json_t *s, *d;

	if (!json_is_array(slices))
		return -EINVAL;
	json_array_foreach(slices, i, s) {
		json_t *devs = json_object_get(json_object_get(s, "spec"), "devices");

		json_array_foreach(devs, j, d) {
			int r = rdp_dra_share_device(d, o);

			if (r < 0)
				return r;
		}
	}
	return 0;
}

bool rdp_dra_share_dropped(json_t *slice)
{
	json_t *devs = json_object_get(json_object_get(slice, "spec"), "devices");
	size_t i;
	json_t *d;

	json_array_foreach(devs, i, d)
		if (!json_is_true(json_object_get(d, "allowMultipleAllocations")))
			return true;
	return false;
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool rdp_dra_share_id_valid(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > RDP_DRA_SHARE_ID_MAX || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

int rdp_dra_share_cdi_name(const char *device, const char *share_id, char *buf, size_t len)
{
	int n;

	if (!device || (share_id && !rdp_dra_share_id_valid(share_id)))
		return -EINVAL;
	if (share_id)
		n = snprintf(buf, len, "%s-%s", device, share_id);
	else
		n = snprintf(buf, len, "%s", device);
	if (n < 0 || (size_t)n >= len)
		return -ENOBUFS;
	return n;
}

bool rdp_dra_share_same(const char *dev_a, const char *share_a, const char *dev_b,
			const char *share_b)
{
	if (strcmp(dev_a, dev_b) != 0)
		return false;
	if (!share_a || !share_b)
		return !share_a && !share_b;
	return strcmp(share_a, share_b) == 0;
}
