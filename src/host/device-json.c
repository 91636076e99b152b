/* SPDX-License-Identifier: MIT */
#include "device-json.h"

#include <string.h>

#include "alloc.h"

/* A JSON string of s, null when s is empty. Bytes that are not UTF-8 become '?'. */
static json_t *str_or_null(const char *s)
{
	json_t *j;
	char *copy;

	if (!s || !*s)
		return json_null();
	j = json_string(s);
	if (j)
		return j;
	copy = rdp_strdup(s);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(copy);
	rdp_free(copy);
	return j;
}

/* json_object_set_new() that also fails for a NULL value (which it would refuse anyway). */
static int set(json_t *o, const char *key, json_t *v)
{
	if (!v)
		return -1;
	return json_object_set_new(o, key, v);
}

static json_t *strv_to_json(char *const *v, size_t n)
{
	json_t *a = json_array();

	if (!a)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *s = str_or_null(v[i]);

		if (!s || json_array_append_new(a, s) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *port_to_json(const struct rdp_port *p)
{
	json_t *o = json_object();
	int r = 0;

	if (!o)
		return NULL;
	r |= set(o, "port", json_integer(p->num));
	r |= set(o, "state", str_or_null(p->state_name));
	r |= set(o, "phys_state", str_or_null(p->phys_state_name));
	r |= set(o, "link_layer",
		 p->link_layer == RDP_LINK_UNKNOWN
			 ? json_null()
			 : json_string(rdp_link_layer_name(p->link_layer)));
	r |= set(o, "rate", str_or_null(p->rate));
	r |= set(o, "roce_v2_ipv4_gid_index",
		 p->roce_v2_ipv4_gid_index >= 0 ? json_integer(p->roce_v2_ipv4_gid_index)
						: json_null());
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *rdp_device_to_json(const struct rdp_device *d)
{
	json_t *o = json_object(), *ports;
	int r = 0;

	if (!o)
		return NULL;
	r |= set(o, "name", str_or_null(d->name));
	r |= set(o, "pci_address", str_or_null(d->pci_address));
	r |= set(o, "vendor", str_or_null(d->vendor));
	r |= set(o, "device_id", str_or_null(d->device_id));
	r |= set(o, "class", str_or_null(d->pci_class));
	r |= set(o, "driver", str_or_null(d->driver));
	r |= set(o, "rdma_driver", str_or_null(d->rdma_driver));
	r |= set(o, "netdevs", strv_to_json(d->netdevs, d->n_netdevs));
	r |= set(o, "numa_node", json_integer(d->numa_node));
	r |= set(o, "is_vf", json_boolean(d->is_vf));
	r |= set(o, "pf_pci_address", str_or_null(d->is_vf ? d->pf_pci_address : ""));
	r |= set(o, "pf_netdev", str_or_null(d->is_vf ? d->pf_netdev : ""));
	r |= set(o, "sf_num", d->is_sf ? json_integer(d->sf_num) : json_null());
	{
		char id[RDP_UNIT_ID_MAX];

		/* Its unit ID in an exclusive resource. */
		r |= set(o, "unit_id", json_string(rdp_device_unit_id(d, id, sizeof(id))));
	}
	r |= set(o, "node_guid", str_or_null(d->node_guid));
	r |= set(o, "fw_ver", str_or_null(d->fw_ver));
	r |= set(o, "hca_type", str_or_null(d->hca_type));
	ports = json_array();
	r |= set(o, "ports", ports);
	for (size_t i = 0; !r && i < d->n_ports; i++) {
		json_t *p = port_to_json(&d->ports[i]);

		r |= p ? json_array_append_new(ports, p) : -1;
	}
	r |= set(o, "char_devices", strv_to_json(d->char_devices, d->n_char_devices));
	r |= set(o, "problems", strv_to_json(d->problems, d->n_problems));
	r |= set(o, "usable", json_boolean(rdp_device_is_usable(d)));
	r |= set(o, "unusable_reason",
		 rdp_device_is_usable(d) ? json_null() : str_or_null(d->unusable_reason));
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *rdp_host_to_json(const struct rdp_host *h)
{
	json_t *o = json_object(), *devs;
	int r = 0;

	if (!o)
		return NULL;
	devs = json_array();
	r |= set(o, "devices", devs);
	for (size_t i = 0; !r && i < h->n_devices; i++) {
		json_t *d = rdp_device_to_json(&h->devices[i]);

		r |= d ? json_array_append_new(devs, d) : -1;
	}
	r |= set(o, "rdma_cm", str_or_null(h->rdma_cm));
	r |= set(o, "netns_mode", json_string(rdp_netns_mode_name(h->netns_mode)));
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}
