// go-kubelet: the kubelet side of the benchmark, in grpc-go as kubelet's device manager is.
// It serves v1beta1.Registration on <root>/device-plugins/kubelet.sock and, for each Register,
// dials the plugin's endpoint (:authority localhost), calls GetDevicePluginOptions and keeps a
// ListAndWatch stream, as kubelet does. It starts the plugin command given after "--" itself
// and measures, printing one JSON object on stdout:
//
//	starts     process start -> first ListAndWatch message received (ns), -starts times;
//	           starts_register: process start -> its Register received
//	snapshot   the first message: units and encoded size
//	rss        VmRSS/VmHWM (KiB) idle (after -settle) and after -allocs Allocate calls
//	allocate   latencies (ns) of -allocs sequential Allocate calls over the one connection
//	preferred  latencies (ns) of -prefs sequential GetPreferredAllocation calls, as kubelet's
//	           device manager makes them: available = every unit ID of the first snapshot
//	           (kubelet passes a Go set: any order; here reversed, the worst for a plugin
//	           that expects sorted input), must-include = the last -pref-must of them,
//	           allocation_size = -pref-size; preferred_response: the first answer
//	rereg      -rereg kubelet restarts: stop the server and every connection, unlink every
//	           socket of device-plugins (kubelet's CleanupPluginDirectory), listen again on
//	           kubelet.sock; ns until the plugin's new Register arrives and until its first
//	           ListAndWatch message
//	rescans    -rescans SIGHUPs, each waited for until a stderr line containing -marker:
//	           wall ns and CPU ns (sum of the threads' /proc/<pid>/task/*/schedstat), and how
//	           many ListAndWatch messages arrived meanwhile (none is right when nothing changed)
//	rescan_allocate  with -rescan-allocs: a second client goroutine calls Allocate back to back
//	           for the whole rescan phase (-rescan-gap between the end of one rescan and the next
//	           SIGHUP); latencies (ns) of the calls that overlapped a rescan (SIGHUP sent to
//	           -marker seen) and of those that did not (rescan_allocate_outside). The CPU figure
//	           of such a run includes the Allocate calls.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	pb "rdpbench/v1beta1"
)

var (
	root     = flag.String("root", "", "kubelet root directory (device-plugins/ is made in it)")
	starts   = flag.Int("starts", 1, "start-up measurements (the last start stays up for the other phases)")
	settle   = flag.Duration("settle", 500*time.Millisecond, "wait after registration before reading idle RSS")
	allocs   = flag.Int("allocs", 0, "sequential Allocate calls")
	allocID  = flag.String("alloc-id", "0", "the unit ID each Allocate asks for")
	prefs    = flag.Int("prefs", 0, "sequential GetPreferredAllocation calls")
	prefSize = flag.Int("pref-size", 1, "allocation_size of each GetPreferredAllocation")
	prefMust = flag.Int("pref-must", 0, "must-include IDs of each GetPreferredAllocation")
	rereg    = flag.Int("rereg", 0, "kubelet restarts")
	rescans  = flag.Int("rescans", 0, "SIGHUP rescans")
	rescanAl = flag.Bool("rescan-allocs", false, "call Allocate back to back during the rescans")
	rescanGp = flag.Duration("rescan-gap", 0, "pause between the end of a rescan and the next SIGHUP")
	marker   = flag.String("marker", "event=rescanned", "stderr text that ends a rescan")
	logPath  = flag.String("log", "", "append the plugin's stderr to this file")
	timeout  = flag.Duration("timeout", 60*time.Second, "limit of each wait")
	waitUnit = flag.Int("units", -1, "wait for a first snapshot of this many units (-1: any)")
)

type regEvent struct {
	t   time.Time
	req *pb.RegisterRequest
}

type snapEvent struct {
	t     time.Time
	gen   int
	units int
	size  int
	ids   []string
}

type kubelet struct {
	dir    string
	sock   string
	regCh  chan regEvent
	snapCh chan snapEvent

	mu     sync.Mutex
	gen    int
	server *grpc.Server
	conns  []*grpc.ClientConn
	client *pb.DevicePluginClient
}

// running is the plugin process of the moment: die kills it, so that a failed run leaves no
// plugin behind holding the caller's stdout.
var running *exec.Cmd

func die(format string, a ...interface{}) {
	fmt.Fprintf(os.Stderr, "go-kubelet: "+format+"\n", a...)
	if running != nil && running.Process != nil {
		running.Process.Kill()
	}
	os.Exit(1)
}

func unixDialer(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", addr)
}

func (k *kubelet) Register(_ context.Context, r *pb.RegisterRequest) (*pb.Empty, error) {
	t := time.Now()
	if r.Version != pb.Version {
		return nil, fmt.Errorf("version %q not supported", r.Version)
	}
	k.mu.Lock()
	gen := k.gen
	k.mu.Unlock()
	k.regCh <- regEvent{t, r}
	go k.connect(gen, filepath.Join(k.dir, r.Endpoint)) // as kubelet's addEndpoint goroutine
	return &pb.Empty{}, nil
}

func (k *kubelet) connect(gen int, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := grpc.DialContext(ctx, path, grpc.WithInsecure(), grpc.WithBlock(),
		grpc.WithAuthority("localhost"), grpc.WithContextDialer(unixDialer),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-kubelet: dial %s: %v\n", path, err)
		return
	}
	k.mu.Lock()
	if gen != k.gen {
		k.mu.Unlock()
		cc.Close()
		return
	}
	k.conns = append(k.conns, cc)
	c := pb.NewDevicePluginClient(cc)
	k.client = c
	k.mu.Unlock()
	if _, err := c.GetDevicePluginOptions(context.Background(), &pb.Empty{}); err != nil {
		if gen != k.generation() {
			return
		}
		fmt.Fprintf(os.Stderr, "go-kubelet: GetDevicePluginOptions: %v\n", err)
		return
	}
	s, err := c.ListAndWatch(context.Background(), &pb.Empty{})
	if err != nil {
		if gen == k.generation() {
			fmt.Fprintf(os.Stderr, "go-kubelet: ListAndWatch: %v\n", err)
		}
		return
	}
	for {
		m := new(pb.ListAndWatchResponse)
		if err := s.RecvMsg(m); err != nil {
			return
		}
		ids := make([]string, len(m.Devices))
		for i, d := range m.Devices {
			ids[i] = d.ID
		}
		k.snapCh <- snapEvent{time.Now(), gen, len(m.Devices), proto.Size(m), ids}
	}
}

func (k *kubelet) start() {
	os.Remove(k.sock)
	l, err := net.Listen("unix", k.sock)
	if err != nil {
		die("listen %s: %v", k.sock, err)
	}
	s := grpc.NewServer()
	pb.RegisterRegistrationServer(s, k)
	go s.Serve(l)
	k.mu.Lock()
	k.server = s
	k.mu.Unlock()
}

// stop: kubelet goes away, its server and every connection to plugins with it.
func (k *kubelet) stop() {
	k.mu.Lock()
	k.gen++
	s, conns := k.server, k.conns
	k.server, k.conns, k.client = nil, nil, nil
	k.mu.Unlock()
	if s != nil {
		s.Stop()
	}
	for _, c := range conns {
		c.Close()
	}
}

// cleanup: kubelet's CleanupPluginDirectory, every socket of device-plugins unlinked.
func (k *kubelet) cleanup() {
	ents, _ := os.ReadDir(k.dir)
	for _, e := range ents {
		if e.Type()&os.ModeSocket != 0 {
			os.Remove(filepath.Join(k.dir, e.Name()))
		}
	}
}

func (k *kubelet) generation() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen
}

func drain(k *kubelet) {
	for {
		select {
		case <-k.regCh:
		case <-k.snapCh:
		default:
			return
		}
	}
}

func (k *kubelet) waitSnap(gen int) snapEvent {
	deadline := time.After(*timeout)
	for {
		select {
		case e := <-k.snapCh:
			if e.gen == gen && (*waitUnit < 0 || e.units == *waitUnit) {
				return e
			}
		case <-deadline:
			die("no ListAndWatch snapshot within %v", *timeout)
		}
	}
}

// ---- the plugin process ------------------------------------------------------------------------

type child struct {
	cmd     *exec.Cmd
	started time.Time
	marks   chan time.Time
	done    chan struct{}
}

func spawn(args []string, logw io.Writer) *child {
	c := &child{cmd: exec.Command(args[0], args[1:]...), marks: make(chan time.Time, 4096),
		done: make(chan struct{})}
	c.cmd.Stdout = os.Stderr
	pipe, err := c.cmd.StderrPipe()
	if err != nil {
		die("%v", err)
	}
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		die("start %s: %v", args[0], err)
	}
	running = c.cmd
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.Contains(line, *marker) {
				c.marks <- time.Now()
			}
			if logw != nil {
				fmt.Fprintln(logw, line)
			}
		}
		close(c.done)
	}()
	return c
}

func (c *child) stop() int {
	c.cmd.Process.Signal(syscall.SIGTERM)
	<-c.done
	c.cmd.Wait()
	return c.cmd.ProcessState.ExitCode()
}

func procStatus(pid int) map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return out
	}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Fields(ln)
		if len(f) >= 2 && (f[0] == "VmRSS:" || f[0] == "VmHWM:" || f[0] == "Threads:") {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			out[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return out
}

// cpuNs: CPU time of every thread of pid, from schedstat (ns).
func cpuNs(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			sum += v
		}
	}
	return sum
}

func stats(v []int64) map[string]int64 {
	if len(v) == 0 {
		return nil
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum int64
	for _, x := range s {
		sum += x
	}
	q := func(p float64) int64 { return s[int(p*float64(len(s)-1)+0.5)] }
	return map[string]int64{"n": int64(len(s)), "min": s[0], "p50": q(0.5), "p90": q(0.9),
		"p99": q(0.99), "max": s[len(s)-1], "mean": sum / int64(len(s))}
}

type allocCall struct{ start, end time.Time }

// allocLoop: Allocate calls back to back on the kubelet's connection until stop is closed.
func allocLoop(cl *pb.DevicePluginClient, stop <-chan struct{}) []allocCall {
	req := &pb.AllocateRequest{ContainerRequests: []*pb.ContainerAllocateRequest{{DevicesIds: []string{*allocID}}}}
	var out []allocCall
	for {
		select {
		case <-stop:
			return out
		default:
		}
		t := time.Now()
		_, err := cl.Allocate(context.Background(), req)
		out = append(out, allocCall{t, time.Now()})
		if err != nil {
			die("Allocate during the rescans: %v", err)
		}
	}
}

func main() {
	flag.Parse()
	args := flag.Args()
	if *root == "" || len(args) == 0 {
		die("usage: go-kubelet -root DIR [options] -- plugin-command args...")
	}
	var logw io.Writer
	if *logPath != "" {
		f, err := os.OpenFile(*logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			die("%v", err)
		}
		defer f.Close()
		logw = f
	}
	k := &kubelet{dir: filepath.Join(*root, "device-plugins"), regCh: make(chan regEvent, 1024),
		snapCh: make(chan snapEvent, 1<<16)}
	k.sock = filepath.Join(k.dir, pb.KubeletSocketName)
	if err := os.MkdirAll(k.dir, 0o750); err != nil {
		die("%v", err)
	}
	k.start()
	res := map[string]interface{}{}
	var unitIDs []string

	// Start-up: process start -> first ListAndWatch message.
	var startNs, regNs []int64
	var c *child
	for i := 0; i < *starts || i == 0; i++ {
		if c != nil {
			c.stop()
			k.stop()
			k.cleanup()
			k.start()
			drain(k)
		}
		gen := k.generation()
		c = spawn(args, logw)
		e := k.waitSnap(gen)
		startNs = append(startNs, e.t.Sub(c.started).Nanoseconds())
		select { // the Register of this start, sent before the snapshot
		case r := <-k.regCh:
			regNs = append(regNs, r.t.Sub(c.started).Nanoseconds())
		default:
		}
		res["snapshot"] = map[string]int{"units": e.units, "bytes": e.size}
		unitIDs = e.ids
	}
	res["starts"] = stats(startNs)
	res["starts_register"] = stats(regNs)
	pid := c.cmd.Process.Pid

	time.Sleep(*settle)
	res["rss_idle"] = procStatus(pid)

	if *allocs > 0 {
		k.mu.Lock()
		cl := k.client
		k.mu.Unlock()
		req := &pb.AllocateRequest{ContainerRequests: []*pb.ContainerAllocateRequest{{DevicesIds: []string{*allocID}}}}
		lat := make([]int64, 0, *allocs)
		cpu0 := cpuNs(pid)
		t0 := time.Now()
		for i := 0; i < *allocs; i++ {
			t := time.Now()
			r, err := cl.Allocate(context.Background(), req)
			lat = append(lat, time.Since(t).Nanoseconds())
			if err != nil {
				die("Allocate %d: %v", i, err)
			}
			if i == 0 {
				if len(r.ContainerResponses) != 1 || len(r.ContainerResponses[0].Devices) == 0 {
					die("Allocate: no device in %v", r)
				}
				// The device specs alone (what the shared plugin answers) and the
				// variables rdma-dp adds beside them (RDMA_DEVICE_<RESOURCE>...).
				bare := proto.Clone(r).(*pb.AllocateResponse)
				for _, c := range bare.ContainerResponses {
					c.Envs = nil
				}
				res["allocate_response"] = map[string]int{"devices": len(r.ContainerResponses[0].Devices),
					"bytes": proto.Size(bare)}
				res["allocate_envs"] = map[string]int{"envs": len(r.ContainerResponses[0].Envs),
					"bytes": proto.Size(r) - proto.Size(bare)}
			}
		}
		res["allocate_wall_ns"] = time.Since(t0).Nanoseconds()
		res["allocate_cpu_ns"] = cpuNs(pid) - cpu0
		res["allocate"] = stats(lat)
		res["rss_allocs"] = procStatus(pid)
	}

	if *prefs > 0 {
		k.mu.Lock()
		cl := k.client
		k.mu.Unlock()
		avail := make([]string, len(unitIDs))
		for i, id := range unitIDs {
			avail[len(unitIDs)-1-i] = id
		}
		if *prefMust > len(avail) {
			die("-pref-must %d: only %d units", *prefMust, len(avail))
		}
		req := &pb.PreferredAllocationRequest{ContainerRequests: []*pb.ContainerPreferredAllocationRequest{{
			AvailableDeviceIDs: avail, MustIncludeDeviceIDs: avail[:*prefMust],
			AllocationSize: int32(*prefSize)}}}
		lat := make([]int64, 0, *prefs)
		cpu0 := cpuNs(pid)
		for i := 0; i < *prefs; i++ {
			t := time.Now()
			r, err := cl.GetPreferredAllocation(context.Background(), req)
			lat = append(lat, time.Since(t).Nanoseconds())
			if err != nil {
				die("GetPreferredAllocation %d: %v", i, err)
			}
			if i == 0 {
				if len(r.ContainerResponses) != 1 {
					die("GetPreferredAllocation: %v", r)
				}
				res["preferred_response"] = r.ContainerResponses[0].DeviceIDs
			}
		}
		res["preferred_cpu_ns"] = cpuNs(pid) - cpu0
		res["preferred"] = stats(lat)
	}

	if *rereg > 0 {
		var regNs, snapNs []int64
		for i := 0; i < *rereg; i++ {
			k.stop()
			drain(k)
			t0 := time.Now()
			k.cleanup()
			k.start()
			gen := k.generation()
			select {
			case e := <-k.regCh:
				regNs = append(regNs, e.t.Sub(t0).Nanoseconds())
			case <-time.After(*timeout):
				die("no Register within %v after kubelet restart %d", *timeout, i)
			}
			snapNs = append(snapNs, k.waitSnap(gen).t.Sub(t0).Nanoseconds())
		}
		res["rereg_register"] = stats(regNs)
		res["rereg_snapshot"] = stats(snapNs)
		res["rss_rereg"] = procStatus(pid)
	}

	if *rescans > 0 {
		drain(k)
		for more := true; more; { // the marks of the start-up scan
			select {
			case <-c.marks:
			default:
				more = false
			}
		}
		var wall, cpu []int64
		var windows [][2]time.Time // [SIGHUP sent, marker seen]
		var calls []allocCall
		stopAl := make(chan struct{})
		doneAl := make(chan struct{})
		if *rescanAl {
			k.mu.Lock()
			cl := k.client
			k.mu.Unlock()
			go func() {
				calls = allocLoop(cl, stopAl)
				close(doneAl)
			}()
			time.Sleep(*rescanGp)
		}
		for i := 0; i < *rescans; i++ {
			cpu0 := cpuNs(pid)
			t0 := time.Now()
			c.cmd.Process.Signal(syscall.SIGHUP)
			select {
			case t := <-c.marks:
				wall = append(wall, t.Sub(t0).Nanoseconds())
				windows = append(windows, [2]time.Time{t0, t})
			case <-time.After(*timeout):
				die("no %q line within %v after SIGHUP %d", *marker, *timeout, i)
			}
			cpu = append(cpu, cpuNs(pid)-cpu0)
			time.Sleep(*rescanGp)
		}
		if *rescanAl {
			close(stopAl)
			<-doneAl
			var in, out []int64
			for _, a := range calls {
				hit := false
				for _, w := range windows {
					if a.start.Before(w[1]) && a.end.After(w[0]) {
						hit = true
						break
					}
				}
				if hit {
					in = append(in, a.end.Sub(a.start).Nanoseconds())
				} else {
					out = append(out, a.end.Sub(a.start).Nanoseconds())
				}
			}
			res["rescan_allocate"] = stats(in)
			res["rescan_allocate_outside"] = stats(out)
		}
		time.Sleep(300 * time.Millisecond)
		msgs := 0
		for more := true; more; {
			select {
			case <-k.snapCh:
				msgs++
			default:
				more = false
			}
		}
		res["rescan_wall"] = stats(wall)
		res["rescan_cpu"] = stats(cpu)
		res["rescan_messages"] = msgs
		res["rss_rescan"] = procStatus(pid)
	}

	res["exit"] = c.stop()
	k.stop()
	json.NewEncoder(os.Stdout).Encode(res)
}
