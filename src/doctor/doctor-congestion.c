/* SPDX-License-Identifier: MIT */
/*
 * doctor, group "congestion": counters.loss. Per port of every RDMA device, the hw_counters
 * that show loss and retries (class/infiniband/<dev>/ports/<p>/hw_counters/<name>: mlx5's names
 * with node_exporter's meanings, and rxe's) are read twice, ctx->interval_ms apart (one sleep for all ports);
 * a counter that rose is reported with its delta and meaning: fail for the retries that
 * exhausted (NCCL status 12/13), warn for the signs of loss (out of sequence, NAK-sequence,
 * ACK timeouts, ignored CNPs...). Unprivileged: hw_counters are world-readable. Ports with
 * none of the files (siw, old kernels) skip; an interval of 0 skips the group.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "doctor-ports.h"
#include "doctor.h"
#include "sysfs.h"

const struct rdp_loss_counter rdp_loss_counters[] = {
	{"req_transport_retries_exceeded", RDP_CHECK_FAIL,
	 "the requester exhausted its transport retries (NCCL_IB_RETRY_CNT) and its QP went to "
	 "error: NCCL status 12"},
	{"req_rnr_retries_exceeded", RDP_CHECK_FAIL,
	 "the requester exhausted its RNR retries and its QP went to error: NCCL status 13"},
	{"local_ack_timeout_err", RDP_CHECK_WARN,
	 "the ACK timer expired and requests were resent (retries not yet exhausted)"},
	{"out_of_sequence", RDP_CHECK_WARN, "out-of-sequence packets received: packets lost upstream"},
	{"packet_seq_err", RDP_CHECK_WARN, "NAK-sequence errors received: the peer saw packets lost"},
	{"implied_nak_seq_err", RDP_CHECK_WARN,
	 "implied NAK-sequence errors: responses skipped PSNs, packets lost"},
	{"duplicate_request", RDP_CHECK_WARN,
	 "duplicate requests received: the peer resent after a lost packet or ACK"},
	{"rnr_nak_retry_err", RDP_CHECK_WARN,
	 "RNR NAKs received: the responder had no receive buffer posted"},
	{"rp_cnp_ignored", RDP_CHECK_WARN,
	 "CNPs received but ignored: RoCE congestion control is off; verify ECN is enabled on "
	 "the adapter"},
	{"roce_adp_retrans", RDP_CHECK_WARN, "adaptive retransmissions after loss"},
	{"roce_adp_retrans_to", RDP_CHECK_WARN, "adaptive retransmission timeouts"},
	{"roce_slow_restart", RDP_CHECK_WARN, "slow restarts of senders after loss"},
	{"out_of_buffer", RDP_CHECK_WARN, "packets dropped because no receive WQE was posted"},
	/* rxe's own names (drivers/infiniband/sw/rxe/rxe_hw_counters.c); duplicate_request is
	 * above, the same name and meaning as mlx5's. */
	{"retry_exceeded_err", RDP_CHECK_FAIL,
	 "the requester exhausted its transport retries and its QP went to error: NCCL status "
	 "12"},
	{"retry_rnr_exceeded_err", RDP_CHECK_FAIL,
	 "the requester exhausted its RNR retries and its QP went to error: NCCL status 13"},
	{"completer_retry_err", RDP_CHECK_WARN,
	 "the completer's ACK timer expired and requests were resent (retries not yet "
	 "exhausted)"},
	{"out_of_seq_request", RDP_CHECK_WARN,
	 "out-of-sequence requests received: packets lost upstream"},
	{"rcvd_seq_err", RDP_CHECK_WARN, "NAK-sequence errors received: the peer saw packets lost"},
	{"rcvd_rnr_err", RDP_CHECK_WARN,
	 "RNR NAKs received: the responder had no receive buffer posted"},
	{"send_rnr_err", RDP_CHECK_WARN,
	 "RNR NAKs sent: this side had no receive buffer posted for a request"},
	{"send_err", RDP_CHECK_WARN, "packets the driver failed to hand to its netdev"},
};
_Static_assert(sizeof(rdp_loss_counters) / sizeof(rdp_loss_counters[0]) <= 32,
	       "struct sample keeps one bit per counter in a uint32_t");
const size_t rdp_n_loss_counters = sizeof(rdp_loss_counters) / sizeof(rdp_loss_counters[0]);

#define N_COUNTERS (sizeof(rdp_loss_counters) / sizeof(rdp_loss_counters[0]))

struct sample {
	uint64_t v[N_COUNTERS];
	uint32_t ok; /* bit i: counter i read */
	int err; /* the errno of the first counter that did not read (for the skip) */
};

/* A counter value: decimal digits only, at most 2^64-1. */
static int parse_u64(const char *s, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*ret = v;
	return 0;
}

static void read_sample(int sys, const struct rdp_device *d, const struct rdp_port *p,
			struct sample *s)
{
	char path[RDP_SYSFS_PATH_MAX], buf[32];

	s->ok = 0;
	s->err = 0;
	for (size_t i = 0; i < N_COUNTERS; i++) {
		int n;

		snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/hw_counters/%s", d->name,
			 p->num, rdp_loss_counters[i].name);
		n = rdp_sysfs_read_attr(sys, path, buf, sizeof(buf));
		if (n > 0 && parse_u64(buf, &s->v[i]) == 0) {
			s->ok |= 1u << i;
			continue;
		}
		if (!s->err)
			s->err = n < 0 ? -n : EINVAL;
	}
}

static void sleep_ms(unsigned int ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* b - a; 32-bit queue counters wrap (mlx5 reads them as be32). */
static uint64_t delta(uint64_t a, uint64_t b)
{
	if (b >= a)
		return b - a;
	return a <= UINT32_MAX ? (UINT64_C(1) << 32) - a + b : 0;
}

static int report_port(const struct rdp_doctor_ctx *c, const struct rdp_device *d,
		       const struct rdp_port *p, const struct sample *s0, const struct sample *s1,
		       struct rdp_doctor_report *r)
{
	char subj[RDP_IBDEV_NAME_MAX + 16], finding[1024], symptom[RDP_DOCTOR_TEXT_MAX], fix[640];
	enum rdp_check_status st = RDP_CHECK_OK;
	size_t fl = 0, sl = 0, nread = 0;
	bool cnp = false;
	uint32_t both = s0->ok & s1->ok;

	snprintf(subj, sizeof(subj), "%s port %u", d->name, p->num);
	finding[0] = symptom[0] = '\0';
	for (size_t i = 0; i < N_COUNTERS; i++) {
		const struct rdp_loss_counter *lc = &rdp_loss_counters[i];
		uint64_t dv;

		if (!(both & (1u << i)))
			continue;
		nread++;
		dv = delta(s0->v[i], s1->v[i]);
		if (dv == 0)
			continue;
		if (lc->status > st)
			st = lc->status;
		cnp |= strcmp(lc->name, "rp_cnp_ignored") == 0;
		if (fl < sizeof(finding))
			fl += (size_t)snprintf(finding + fl, sizeof(finding) - fl, "%s%s +%llu",
					       fl ? ", " : "", lc->name, (unsigned long long)dv);
		if (sl < sizeof(symptom))
			sl += (size_t)snprintf(symptom + sl, sizeof(symptom) - sl, "%s%s: %s",
					       sl ? "; " : "", lc->name, lc->meaning);
	}
	if (nread == 0)
		return rdp_doctor_add(r, RDP_GROUP_CONGESTION, "counters.loss", RDP_CHECK_SKIP, subj,
				      NULL, NULL,
				      "no loss counter readable under ports/%u/hw_counters (%s): "
				      "the driver has none (siw) or the kernel is older than 4.6",
				      p->num, strerror(s0->err ? s0->err : s1->err));
	if (st == RDP_CHECK_OK)
		return rdp_doctor_add(r, RDP_GROUP_CONGESTION, "counters.loss", RDP_CHECK_OK, subj,
				      NULL, NULL,
				      "%zu loss and retry counters read twice %u ms apart: none rose",
				      nread, c->interval_ms);
	if (st == RDP_CHECK_FAIL && sl < sizeof(symptom))
		snprintf(symptom + sl, sizeof(symptom) - sl,
			 "; NCCL: \"NET/IB: Got completion from peer ... with status=12\" "
			 "(transport retry counter exceeded), with a hint to raise NCCL_IB_TIMEOUT");
	else if (sl < sizeof(symptom))
		snprintf(symptom + sl, sizeof(symptom) - sl,
			 "; intermittent stalls and lower bandwidth (\"typical of a RoCE fabric "
			 "dropping packets\"), then NCCL status 12 if retries run out");
	if (cnp)
		snprintf(fix, sizeof(fix),
			 "enable ECN/DCQCN on the NIC for the RDMA priority (mlnx_qos / the NIC's "
			 "roce_np/roce_rp ECN settings) and ECN marking on the switches");
	else if (d->rdma_driver[0])
		snprintf(fix, sizeof(fix),
			 "%s runs over %s like any other traffic, without PFC or ECN offload: look "
			 "for drops there (`ip -s link show %s`, `ethtool -S %s`) and on the path to "
			 "the peer; lower the load, or use a NIC with RoCE offload",
			 d->rdma_driver, d->n_netdevs ? d->netdevs[0] : "its netdev",
			 d->n_netdevs ? d->netdevs[0] : "<netdev>",
			 d->n_netdevs ? d->netdevs[0] : "<netdev>");
	else if (p->link_layer == RDP_LINK_ETHER)
		snprintf(fix, sizeof(fix),
			 "make the RDMA traffic class lossless: PFC on its priority (and trust "
			 "DSCP) on the NIC and every switch port, ECN marking; check `ethtool -S "
			 "%s` for rx_discards_phy, pause and symbol errors",
			 d->n_netdevs ? d->netdevs[0] : "<netdev>");
	else
		snprintf(fix, sizeof(fix),
			 "find the lossy link: `ibqueryerrors` / `perfquery` on the fabric "
			 "(symbol errors, link recoveries), reseat or replace the cable; raise "
			 "NCCL_IB_TIMEOUT only as a stopgap");
	return rdp_doctor_add(r, RDP_GROUP_CONGESTION, "counters.loss", st, subj, symptom, fix,
			      "%s in %u ms", finding, c->interval_ms);
}

int rdp_doctor_congestion(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	struct sample *s = NULL;
	size_t n = 0, k = 0;
	int ret = 0;

	if (!c->host || c->host->n_devices == 0) {
		ret = rdp_doctor_add(r, RDP_GROUP_CONGESTION, "counters.loss", RDP_CHECK_SKIP, "",
				     NULL, NULL, "no RDMA device: no counters to read");
		return ret == -ENOMEM ? ret : 0;
	}
	if (c->interval_ms == 0) {
		ret = rdp_doctor_add(r, RDP_GROUP_CONGESTION, "counters.loss", RDP_CHECK_SKIP, "",
				     NULL, NULL,
				     "--interval 0: counters need two samples some time apart");
		return ret == -ENOMEM ? ret : 0;
	}
	for (size_t i = 0; i < c->host->n_devices; i++)
		n += c->host->devices[i].n_ports;
	if (n == 0)
		return 0;
	s = rdp_calloc(n * 2, sizeof(*s));
	if (!s)
		return -ENOMEM;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			sleep_ms(c->interval_ms);
		k = 0;
		for (size_t i = 0; i < c->host->n_devices; i++) {
			const struct rdp_device *d = &c->host->devices[i];

			for (size_t pi = 0; pi < d->n_ports; pi++, k++)
				read_sample(c->sys_fd, d, &d->ports[pi], &s[k * 2 + pass]);
		}
	}
	k = 0;
	for (size_t i = 0; i < c->host->n_devices && ret >= 0; i++) {
		const struct rdp_device *d = &c->host->devices[i];

		for (size_t pi = 0; pi < d->n_ports && ret >= 0; pi++, k++) {
			ret = report_port(c, d, &d->ports[pi], &s[k * 2], &s[k * 2 + 1], r);
			if (ret == -E2BIG)
				ret = 0;
		}
	}
	rdp_free(s);
	return ret == -ENOMEM ? ret : 0;
}
