/* SPDX-License-Identifier: MIT */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "alloc.h"

const char *rdp_link_layer_name(enum rdp_link_layer l)
{
	switch (l) {
	case RDP_LINK_INFINIBAND:
		return "infiniband";
	case RDP_LINK_ETHER:
		return "ether";
	case RDP_LINK_UNKNOWN:
		break;
	}
	return "unknown";
}

const char *rdp_netns_mode_name(enum rdp_netns_mode m)
{
	return m == RDP_NETNS_EXCLUSIVE ? "exclusive" : "shared";
}

const char *rdp_usability_name(enum rdp_usability u)
{
	switch (u) {
	case RDP_USABLE:
		return "usable";
	case RDP_UNUSABLE_INCOMPLETE:
		return "incomplete";
	case RDP_UNUSABLE_NO_UVERBS:
		return "no-uverbs";
	case RDP_UNUSABLE_UVERBS_NODE:
		return "uverbs-node";
	case RDP_UNUSABLE_NO_RDMA_CM:
		return "no-rdma-cm";
	}
	return "unknown";
}

bool rdp_port_state_is_active(int state)
{
	return state == RDP_PORT_ACTIVE || state == RDP_PORT_ACTIVE_DEFER;
}

bool rdp_device_is_active(const struct rdp_device *d)
{
	for (size_t i = 0; i < d->n_ports; i++)
		if (rdp_port_state_is_active(d->ports[i].state))
			return true;
	return false;
}

bool rdp_device_is_usable(const struct rdp_device *d)
{
	return d->usability == RDP_USABLE;
}

dev_t rdp_device_char_devnum(const struct rdp_device *d, size_t i)
{
	return d->char_devnums && i < d->n_char_devices ? d->char_devnums[i] : 0;
}

const struct rdp_device *rdp_host_find(const struct rdp_host *h, const char *name)
{
	for (size_t i = 0; i < h->n_devices; i++)
		if (strcmp(h->devices[i].name, name) == 0)
			return &h->devices[i];
	return NULL;
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rdp_free(v[i]);
	rdp_free(v);
}

void rdp_device_done(struct rdp_device *d)
{
	if (!d)
		return;
	strv_free(d->netdevs, d->n_netdevs);
	rdp_free(d->pci_path);
	strv_free(d->char_devices, d->n_char_devices);
	rdp_free(d->char_devnums);
	strv_free(d->problems, d->n_problems);
	rdp_free(d->ports);
	memset(d, 0, sizeof(*d));
}

struct rdp_host *rdp_host_free(struct rdp_host *h)
{
	if (!h)
		return NULL;
	for (size_t i = 0; i < h->n_devices; i++)
		rdp_device_done(&h->devices[i]);
	rdp_free(h->devices);
	strv_free(h->problems, h->n_problems);
	rdp_free(h);
	return NULL;
}

const char *rdp_device_unit_id(const struct rdp_device *d, char *buf, size_t size)
{
	if (!d->pci_address[0])
		snprintf(buf, size, "%s", d->name);
	else if (d->is_sf)
		snprintf(buf, size, "%s-sf%u", d->pci_address, d->sf_num);
	else
		snprintf(buf, size, "%s", d->pci_address);
	return buf;
}
