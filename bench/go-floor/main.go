// go-floor: the smallest grpc-go device plugin that serves a shared RDMA pool the way the Go
// plugins (k8s-rdma-shared-dev-plugin and friends) do, as the floor rdma-dp is measured
// against. It discovers the ib devices under <sysfs>/class/infiniband (optionally only those
// whose port 1 has the given link layer), advertises -units shared units ("0".."N-1", Healthy
// while a port is ACTIVE, the NUMA node when all devices share one), answers Allocate with the
// char devices of every device of the pool (uverbs, umad/issm, rdma_cm; rwm), registers on
// kubelet.sock, re-registers when kubelet re-creates kubelet.sock (inotify, as their fsnotify
// watch does) and rescans on SIGHUP, sending a snapshot only when something changed.
// What it leaves out (config file, selectors, plugin watcher, logging of calls) only makes it
// cheaper: it is a floor for the Go plugins, not a model of one.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"google.golang.org/grpc"

	pb "rdpbench/v1beta1"
)

var (
	sysfsRoot   = flag.String("sysfs-root", "/sys", "sysfs root")
	devRoot     = flag.String("dev-root", "/dev", "dev root")
	kubeletRoot = flag.String("kubelet-root-dir", "/var/lib/kubelet", "kubelet root directory")
	resource    = flag.String("resource", "rdma/floor", "resource name <prefix>/<name>")
	units       = flag.Int("units", 100, "shared units (rdmaHcaMax)")
	linkLayer   = flag.String("link-layer", "", "only devices whose port 1 has this link_layer (InfiniBand, Ethernet); empty: all")
)

type state struct {
	devices []*pb.Device     // the ListAndWatch snapshot
	specs   []*pb.DeviceSpec // Allocate's devices
	nDev    int
	key     string // what the snapshot and Allocate depend on, to tell a change
}

type plugin struct {
	sockDir  string
	sockPath string
	endpoint string

	mu     sync.Mutex
	st     *state
	watch  map[chan *state]struct{}
	server *grpc.Server
}

func readTrim(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func logf(event, format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "time=%s event=%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
		event, fmt.Sprintf(format, a...))
}

// discover walks <sysfs>/class/infiniband as the Go plugins' rdmamap does.
func discover() *state {
	cls := filepath.Join(*sysfsRoot, "class", "infiniband")
	ents, _ := os.ReadDir(cls)
	var specs []string
	numa := map[string]bool{}
	healthy := false
	n := 0
	for _, e := range ents {
		d := filepath.Join(cls, e.Name())
		if *linkLayer != "" && !strings.EqualFold(readTrim(filepath.Join(d, "ports", "1", "link_layer")), *linkLayer) {
			continue
		}
		n++
		ports, _ := os.ReadDir(filepath.Join(d, "ports"))
		for _, p := range ports {
			if strings.Contains(readTrim(filepath.Join(d, "ports", p.Name(), "state")), "ACTIVE") {
				healthy = true
			}
		}
		numa[readTrim(filepath.Join(d, "device", "numa_node"))] = true
		for _, sub := range []string{"infiniband_verbs", "infiniband_mad"} {
			cds, _ := os.ReadDir(filepath.Join(d, "device", sub))
			for _, c := range cds {
				if _, err := os.Stat(filepath.Join(*devRoot, "infiniband", c.Name())); err == nil {
					specs = append(specs, "/dev/infiniband/"+c.Name())
				}
			}
		}
	}
	if n > 0 {
		if _, err := os.Stat(filepath.Join(*devRoot, "infiniband", "rdma_cm")); err == nil {
			specs = append(specs, "/dev/infiniband/rdma_cm")
		}
	}
	sort.Strings(specs)
	st := &state{nDev: n, key: fmt.Sprint(n, healthy, numa, specs)}
	for _, s := range specs {
		st.specs = append(st.specs, &pb.DeviceSpec{ContainerPath: s, HostPath: s, Permissions: "rwm"})
	}
	if n == 0 {
		return st
	}
	health := pb.Unhealthy
	if healthy {
		health = pb.Healthy
	}
	var topo *pb.TopologyInfo
	if len(numa) == 1 {
		for k := range numa {
			if id, err := strconv.ParseInt(k, 10, 64); err == nil && id >= 0 {
				topo = &pb.TopologyInfo{Nodes: []*pb.NUMANode{{ID: id}}}
			}
		}
	}
	for i := 0; i < *units; i++ {
		st.devices = append(st.devices, &pb.Device{ID: strconv.Itoa(i), Health: health, Topology: topo})
	}
	return st
}

func (p *plugin) GetDevicePluginOptions(context.Context, *pb.Empty) (*pb.DevicePluginOptions, error) {
	return &pb.DevicePluginOptions{}, nil
}

func (p *plugin) ListAndWatch(_ *pb.Empty, s pb.DevicePlugin_ListAndWatchServer) error {
	ch := make(chan *state, 1)
	p.mu.Lock()
	st := p.st
	p.watch[ch] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.watch, ch)
		p.mu.Unlock()
	}()
	for {
		if err := s.Send(&pb.ListAndWatchResponse{Devices: st.devices}); err != nil {
			return err
		}
		select {
		case st = <-ch:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *plugin) GetPreferredAllocation(context.Context, *pb.PreferredAllocationRequest) (*pb.PreferredAllocationResponse, error) {
	return &pb.PreferredAllocationResponse{}, nil
}

func (p *plugin) Allocate(_ context.Context, r *pb.AllocateRequest) (*pb.AllocateResponse, error) {
	p.mu.Lock()
	specs := p.st.specs
	p.mu.Unlock()
	resp := &pb.AllocateResponse{}
	for range r.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pb.ContainerAllocateResponse{Devices: specs})
	}
	return resp, nil
}

func (p *plugin) PreStartContainer(context.Context, *pb.PreStartContainerRequest) (*pb.PreStartContainerResponse, error) {
	return &pb.PreStartContainerResponse{}, nil
}

func unixDialer(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}

// start serves the plugin socket and registers, as the Go plugins' Start() does.
func (p *plugin) start() error {
	os.Remove(p.sockPath)
	l, err := net.Listen("unix", p.sockPath)
	if err != nil {
		return err
	}
	s := grpc.NewServer()
	pb.RegisterDevicePluginServer(s, p)
	go s.Serve(l)
	p.server = s
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cc, err := grpc.DialContext(ctx, filepath.Join(p.sockDir, pb.KubeletSocketName), grpc.WithInsecure(),
		grpc.WithBlock(), grpc.WithContextDialer(unixDialer))
	if err != nil {
		return err
	}
	defer cc.Close()
	_, err = pb.Register(ctx, cc, &pb.RegisterRequest{Version: pb.Version, Endpoint: p.endpoint,
		ResourceName: *resource, Options: &pb.DevicePluginOptions{}})
	if err == nil {
		logf("registered", "resource=%s units=%d", *resource, *units)
	}
	return err
}

func (p *plugin) stop() {
	if p.server != nil {
		p.server.Stop()
		p.server = nil
	}
	os.Remove(p.sockPath)
}

func (p *plugin) rescan() {
	t0 := time.Now()
	st := discover()
	p.mu.Lock()
	changed := st.key != p.st.key
	if changed {
		p.st = st
		for ch := range p.watch {
			select {
			case <-ch:
			default:
			}
			ch <- st
		}
	}
	p.mu.Unlock()
	logf("rescanned", "devices=%d changed=%v wall_us=%d", st.nDev, changed, time.Since(t0).Microseconds())
}

// watchKubelet reports the creation of kubelet.sock (kubelet restarted) on the channel.
func watchKubelet(dir string, out chan<- struct{}) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		logf("inotify-failed", "error=%v", err)
		return
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CREATE); err != nil {
		logf("inotify-failed", "error=%v", err)
		return
	}
	buf := make([]byte, 64*1024)
	for {
		n, err := syscall.Read(fd, buf)
		if err != nil {
			return
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			if name == pb.KubeletSocketName {
				out <- struct{}{}
			}
			off += syscall.SizeofInotifyEvent + int(ev.Len)
		}
	}
}

func main() {
	flag.Parse()
	dir := filepath.Join(*kubeletRoot, "device-plugins")
	name := (*resource)[strings.LastIndex(*resource, "/")+1:]
	p := &plugin{sockDir: dir, endpoint: name + ".sock", sockPath: filepath.Join(dir, name+".sock"),
		watch: map[chan *state]struct{}{}}
	p.st = discover()
	logf("starting", "resource=%s devices=%d units=%d", *resource, p.st.nDev, *units)

	restart := make(chan struct{}, 16)
	go watchKubelet(dir, restart)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	retry := time.NewTimer(0)
	<-retry.C
	if err := p.start(); err != nil {
		logf("register-failed", "error=%v", err)
		retry.Reset(time.Second)
	}
	for {
		select {
		case <-restart:
			p.stop()
			if err := p.start(); err != nil {
				logf("register-failed", "error=%v", err)
				retry.Reset(time.Second)
			}
		case <-retry.C:
			p.stop()
			if err := p.start(); err != nil {
				logf("register-failed", "error=%v", err)
				retry.Reset(time.Second)
			}
		case s := <-sigs:
			if s == syscall.SIGHUP {
				p.rescan()
				continue
			}
			p.stop()
			os.Exit(0)
		}
	}
}
