/* SPDX-License-Identifier: MIT */
/* Helpers of the doctor's PCI groups: see doctor-pci.h. */
#define _GNU_SOURCE
#include "doctor-pci.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sysfs.h"

int rdp_pcie_parse_speed(const char *s, unsigned int *ret)
{
	unsigned long whole = 0;
	unsigned int tenth = 0, digits = 0;
	const char *p = s;

	if (strcmp(s, "Unknown") == 0) {
		*ret = 0;
		return 0;
	}
	for (; *p >= '0' && *p <= '9'; p++) {
		if (++digits > 4)
			return -EINVAL;
		whole = whole * 10 + (unsigned long)(*p - '0');
	}
	if (digits == 0)
		return -EINVAL;
	if (*p == '.') {
		p++;
		if (*p < '0' || *p > '9')
			return -EINVAL;
		tenth = (unsigned int)(*p++ - '0');
	}
	if (strcmp(p, " GT/s") != 0 && strcmp(p, " GT/s PCIe") != 0)
		return -EINVAL;
	if (whole == 0 && tenth == 0)
		return -EINVAL;
	*ret = (unsigned int)whole * 10 + tenth;
	return 0;
}

static int read_one(int sys_fd, const char *bdf, const char *attr, bool speed, unsigned int *ret)
{
	char path[RDP_SYSFS_PATH_MAX], buf[64];
	long v;
	int r;

	if ((size_t)snprintf(path, sizeof(path), "bus/pci/devices/%s/%s", bdf, attr) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	r = rdp_sysfs_read_attr(sys_fd, path, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (speed)
		return rdp_pcie_parse_speed(buf, ret);
	r = rdp_parse_long(buf, 0, 64, &v);
	if (r < 0)
		return r;
	*ret = (unsigned int)v;
	return 0;
}

int rdp_pcie_link_read(int sys_fd, const char *bdf, struct rdp_pcie_link *ret)
{
	struct rdp_pcie_link l = {0};
	int r;

	if (!rdp_is_pci_address(bdf))
		return -EINVAL;
	if ((r = read_one(sys_fd, bdf, "current_link_speed", true, &l.cur_speed)) < 0 ||
	    (r = read_one(sys_fd, bdf, "max_link_speed", true, &l.max_speed)) < 0 ||
	    (r = read_one(sys_fd, bdf, "current_link_width", false, &l.cur_width)) < 0 ||
	    (r = read_one(sys_fd, bdf, "max_link_width", false, &l.max_width)) < 0)
		return r;
	*ret = l;
	return 0;
}

bool rdp_pcie_link_degraded(const struct rdp_pcie_link *l)
{
	return (l->cur_speed && l->max_speed && l->cur_speed < l->max_speed) ||
	       (l->cur_width && l->max_width && l->cur_width < l->max_width);
}

unsigned int rdp_pcie_gbps(unsigned int speed, unsigned int width)
{
	unsigned long long raw = (unsigned long long)speed * width; /* tenths of Gb/s */

	if (speed <= 50)
		return (unsigned int)(raw * 8 / 100);
	if (speed < 640)
		return (unsigned int)(raw * 128 / 1300);
	return (unsigned int)(raw * 242 / 2560);
}

const char *rdp_pcie_link_str(unsigned int speed, unsigned int width, char *buf, size_t size)
{
	char s[16] = "?", w[16] = "?";

	if (speed)
		snprintf(s, sizeof(s), "%u.%u", speed / 10, speed % 10);
	if (width)
		snprintf(w, sizeof(w), "%u", width);
	snprintf(buf, size, "%s GT/s x%s", s, w);
	return buf;
}

const char *rdp_pci_function_of(const struct rdp_device *d)
{
	if (d->is_vf && d->pf_pci_address[0])
		return d->pf_pci_address;
	return d->pci_address[0] ? d->pci_address : NULL;
}

int rdp_pci_iommu_group(int sys_fd, const char *bdf, char *buf, size_t size)
{
	char path[RDP_SYSFS_PATH_MAX], link[RDP_SYSFS_PATH_MAX];
	const char *base;
	int r;

	if (!rdp_is_pci_address(bdf))
		return -EINVAL;
	snprintf(path, sizeof(path), "bus/pci/devices/%s/iommu_group", bdf);
	r = rdp_sysfs_read_link(sys_fd, path, link, sizeof(link));
	if (r < 0)
		return r;
	base = rdp_path_basename(link);
	if (!*base || strlen(base) >= size || strspn(base, "0123456789") != strlen(base))
		return -EINVAL;
	memcpy(buf, base, strlen(base) + 1);
	return 0;
}
