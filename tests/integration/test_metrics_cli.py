"""rdma-dp metrics on every fixture node: promtool accepts the exposition (Debian's prometheus
package), the values are the fixture's (data x 4, rate in bytes, renamed devices' hw counters,
saturation, an unreadable counter left out, unknown files under the generic names, port_info
labels), and --textfile writes rdma_dp.prom atomically for node_exporter."""
import os
import re
import subprocess

import pytest

from conftest import node_args

PROMTOOL = "/usr/bin/promtool"
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')


def nodes(fixtures_dir):
    return sorted(p.name for p in fixtures_dir.iterdir() if (p / "sys").is_dir())


def metrics(run, fixtures_dir, node, *extra):
    r = run("metrics", *node_args(fixtures_dir, node), *extra)
    assert r.returncode == 0, r.stderr
    return r


def samples(text):
    """{'name{labels}': value}; every non-comment line must be a sample."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        key = m.group(1) + (m.group(2) or "")
        assert key not in out, "duplicate series " + key
        out[key] = float(m.group(3))
    return out


def val(path):
    with open(path) as f:
        return f.read().strip()


def test_promtool_every_node(run, fixtures_dir):
    if not os.access(PROMTOOL, os.X_OK):
        pytest.skip("promtool not installed (Debian package prometheus; "
                    "scripts/install-deps.sh installs it)")
    checked = 0
    for node in nodes(fixtures_dir):
        text = metrics(run, fixtures_dir, node).stdout
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 0, (node, p.stdout, p.stderr)
        assert text == "" or text.endswith("\n")
        checked += 1
    assert checked >= 15


def test_dgx_values(run, fixtures_dir):
    s = samples(metrics(run, fixtures_dir, "dgx-h100").stdout)
    c = fixtures_dir / "dgx-h100/sys/class/infiniband"
    for dev in ("mlx5_0", "mlx5_3", "mlx5_7"):
        cnt = c / dev / "ports/1/counters"
        lab = '{device="%s",port="1"}' % dev
        assert s["rdma_dp_port_data_transmitted_bytes_total" + lab] == \
            4 * int(val(cnt / "port_xmit_data"))
        assert s["rdma_dp_port_data_received_bytes_total" + lab] == \
            4 * int(val(cnt / "port_rcv_data"))
        assert s["rdma_dp_unicast_packets_transmitted_total" + lab] == \
            int(val(cnt / "unicast_xmit_packets"))
    # devices tell apart
    assert s['rdma_dp_port_data_transmitted_bytes_total{device="mlx5_0",port="1"}'] != \
        s['rdma_dp_port_data_transmitted_bytes_total{device="mlx5_3",port="1"}']
    assert s['rdma_dp_rate_bytes_per_second{device="mlx5_0",port="1"}'] == 400e9 / 8
    assert s['rdma_dp_rate_bytes_per_second{device="mlx5_1",port="1"}'] == 200e9 / 8
    assert s['rdma_dp_port_info{device="mlx5_0",port="1",link_layer="InfiniBand",'
             'netdev="ibp24s0",pci_address="0000:18:00.0",numa_node="0"}'] == 1
    assert s['rdma_dp_port_info{device="mlx5_7",port="1",link_layer="Ethernet",'
             'netdev="enp169s0f0np0",pci_address="0000:a9:00.0",numa_node="1"}'] == 1
    assert s['rdma_dp_lifespan_seconds{device="mlx5_0",port="1"}'] == 0.01
    assert s['rdma_dp_np_cnp_packets_sent_total{device="mlx5_1",port="1"}'] == 0
    # hw counters node_exporter lacks, under descriptive names
    assert 'rdma_dp_req_transport_retries_exceeded_errors_total{device="mlx5_0",port="1"}' in s
    # every ibdev has its info line
    assert len([k for k in s if k.startswith("rdma_dp_info{")]) == 12


def test_renamed_node(run, fixtures_dir):
    r = metrics(run, fixtures_dir, "renamed")
    s = samples(r.stdout)
    c = fixtures_dir / "renamed/sys/class/infiniband"
    # a udev-renamed device keeps its hw counters
    assert s['rdma_dp_rx_write_requests_total{device="ibp24s0",port="1"}'] == \
        int(val(c / "ibp24s0/ports/1/hw_counters/rx_write_requests"))
    assert 'rdma_dp_rp_cnp_packets_handled_total{device="rocep41s0f0",port="1"}' in s
    # the saturated 16-bit counter
    assert s['rdma_dp_symbol_error_total{device="ibp24s0",port="1"}'] == 65535
    assert s['rdma_dp_pma_saturated{device="ibp24s0",port="1",counter="symbol_error"}'] == 1
    assert s['rdma_dp_pma_saturated{device="rocep41s0f0",port="1",counter="symbol_error"}'] == 0
    # N/A (no PMA): no sample, and said on stderr
    assert 'rdma_dp_port_receive_switch_relay_errors_total{device="rocep41s0f0",port="1"}' \
        not in s
    assert 'rdma_dp_port_receive_switch_relay_errors_total{device="ibp24s0",port="1"}' in s
    assert "rocep41s0f0/1: counters/port_rcv_switch_relay_errors: not a decimal number" \
        in r.stderr


def test_unknown_counters_generic(run, fixtures_dir):
    s = samples(metrics(run, fixtures_dir, "irdma-bnxt").stdout)
    hw = fixtures_dir / "irdma-bnxt/sys/class/infiniband/irdma0/ports/1/hw_counters"
    for f in os.listdir(hw):
        assert s['rdma_dp_hw_stat_total{device="irdma0",port="1",counter="%s"}' % f] == \
            int(val(hw / f))
    # irdma and bnxt_re have no counters/: no PMA series, but state and rate
    assert not [k for k in s if "port_data" in k and ("irdma0" in k or "bnxt_re0" in k)]
    assert s['rdma_dp_rate_bytes_per_second{device="irdma0",port="1"}'] == 25e9 / 8
    assert s['rdma_dp_state_id{device="bnxt_re0",port="1"}'] == 4


def test_no_rdma_and_errors(run, fixtures_dir, tmp_path):
    r = metrics(run, fixtures_dir, "no-rdma")
    assert r.stdout == ""
    r = run("metrics", "--sysfs-root", str(tmp_path / "nope"))
    assert r.returncode == 1 and "cannot open sysfs root" in r.stderr
    r = run("metrics", "--bogus")
    assert r.returncode == 2 and "unknown option" in r.stderr
    r = run("metrics", "extra")
    assert r.returncode == 2
    r = run("metrics", "-h")
    assert r.returncode == 0 and "--textfile DIR" in r.stdout
    r = run("--help")
    assert "metrics" in r.stdout


def test_textfile(run, fixtures_dir, tmp_path):
    d = tmp_path / "textfile"
    d.mkdir()
    (d / "rdma_dp.prom").write_text("old\n")
    r = metrics(run, fixtures_dir, "dgx-h100", "--textfile", str(d))
    assert r.stdout == ""
    assert sorted(os.listdir(d)) == ["rdma_dp.prom"]  # no temp file left
    text = (d / "rdma_dp.prom").read_text()
    assert text == metrics(run, fixtures_dir, "dgx-h100").stdout
    assert os.stat(d / "rdma_dp.prom").st_mode & 0o777 == 0o644
    if os.access(PROMTOOL, os.X_OK):
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                           text=True)
        assert p.returncode == 0, p.stdout + p.stderr
    r = run("metrics", *node_args(fixtures_dir, "dgx-h100"), "--textfile",
            str(tmp_path / "missing"))
    assert r.returncode == 1 and "rdma_dp.prom" in r.stderr


def test_device_filter(run, fixtures_dir):
    """--device keeps the named devices (in the node's order) and nothing else; an unknown
    name is a usage error that says where the names come from."""
    r = metrics(run, fixtures_dir, "dgx-h100", "--device", "mlx5_3", "--device", "mlx5_0")
    s = samples(r.stdout)
    devs = {re.search(r'device="([^"]+)"', k).group(1) for k in s if 'device="' in k}
    assert devs == {"mlx5_0", "mlx5_3"}, devs
    order = [re.search(r'device="([^"]+)"', ln).group(1)
             for ln in r.stdout.splitlines() if ln.startswith("rdma_dp_port_info")]
    assert order == ["mlx5_0", "mlx5_3"], order
    full = samples(metrics(run, fixtures_dir, "dgx-h100").stdout)
    assert all(full[k] == v for k, v in s.items())
    r = run("metrics", *node_args(fixtures_dir, "dgx-h100"), "--device", "mlx5_99")
    assert r.returncode == 2 and "--device mlx5_99: no such RDMA device" in r.stderr, r.stderr
