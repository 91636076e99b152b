// SPDX-License-Identifier: MIT
//
// cdi-validate: loads CDI spec files with the reference CDI library as Debian 12 packages it
// (golang-github-container-orchestrated-devices-container-device-interface-dev, v0.5.2, the
// version podman 4.3 vendors), the way a runtime does.
//
//	cdi-validate [-dir DIR] [-inject NAME,NAME...] [SPEC...]
//
// Each SPEC is read with cdi.ReadSpec after cdi.SetSpecValidator(validate.WithSchema(
// schema.BuiltinSchema())), so it passes the JSON schema and the library's own checks. With
// -dir, a registry over DIR alone is refreshed (as containerd, CRI-O and podman do before each
// container) and, with -inject, the qualified names are injected into an empty OCI spec. The
// result is one JSON document on stdout:
//
//	{"specs":[{"path","ok","kind","devices"|"error"}],
//	 "registry":{"devices":[...],"errors":{"path":["..."]}},
//	 "inject":{"unresolved":[...],"error":"...","devices":[OCI linux.devices],
//	           "cgroupDevices":[...],"env":[process.env],"hooks":{OCI hooks}}}
//
// Exit status 0 when every spec loaded, the registry had no error and the injection worked;
// 1 otherwise; 2 for a usage error. A panic inside the library is caught and reported as
// an error ("panic: ...").
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi"
	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi/validate"
	"github.com/container-orchestrated-devices/container-device-interface/schema"
	oci "github.com/opencontainers/runtime-spec/specs-go"
)

type specResult struct {
	Path    string   `json:"path"`
	OK      bool     `json:"ok"`
	Kind    string   `json:"kind,omitempty"`
	Devices []string `json:"devices,omitempty"`
	Error   string   `json:"error,omitempty"`
}

type registryResult struct {
	Devices []string            `json:"devices"`
	Errors  map[string][]string `json:"errors"`
}

type injectResult struct {
	Unresolved    []string                `json:"unresolved,omitempty"`
	Error         string                  `json:"error,omitempty"`
	Devices       []oci.LinuxDevice       `json:"devices"`
	CgroupDevices []oci.LinuxDeviceCgroup `json:"cgroupDevices"`
	Env           []string                `json:"env"`
	Hooks         *oci.Hooks              `json:"hooks,omitempty"`
}

type result struct {
	Specs    []specResult    `json:"specs"`
	Registry *registryResult `json:"registry,omitempty"`
	Inject   *injectResult   `json:"inject,omitempty"`
}

func readSpec(path string) (res specResult) {
	res.Path = path
	defer func() {
		if p := recover(); p != nil {
			res.OK = false
			res.Error = fmt.Sprintf("panic: %v", p)
		}
	}()
	spec, err := cdi.ReadSpec(path, 0)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	res.OK = true
	res.Kind = spec.Kind
	for _, d := range spec.Devices {
		res.Devices = append(res.Devices, cdi.QualifiedName(spec.GetVendor(), spec.GetClass(), d.Name))
	}
	return res
}

func main() {
	dir := flag.String("dir", "", "refresh a registry over this spec directory")
	inject := flag.String("inject", "", "comma-separated qualified device names to inject (needs -dir)")
	flag.Parse()
	if flag.NArg() == 0 && *dir == "" || *inject != "" && *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: cdi-validate [-dir DIR] [-inject NAME,...] [SPEC...]")
		os.Exit(2)
	}
	cdi.SetSpecValidator(validate.WithSchema(schema.BuiltinSchema()))

	failed := false
	out := result{Specs: []specResult{}}
	for _, p := range flag.Args() {
		r := readSpec(p)
		failed = failed || !r.OK
		out.Specs = append(out.Specs, r)
	}
	if *dir != "" {
		func() {
			defer func() {
				if p := recover(); p != nil {
					failed = true
					out.Registry = &registryResult{Devices: []string{},
						Errors: map[string][]string{*dir: {fmt.Sprintf("panic: %v", p)}}}
				}
			}()
			reg := cdi.GetRegistry(cdi.WithSpecDirs(*dir), cdi.WithAutoRefresh(false))
			// Refresh's error is what GetErrors lists per file; runtimes only warn on it.
			_ = reg.Refresh()
			rr := &registryResult{Devices: reg.DeviceDB().ListDevices(), Errors: map[string][]string{}}
			if rr.Devices == nil {
				rr.Devices = []string{}
			}
			for path, errs := range reg.GetErrors() {
				for _, e := range errs {
					rr.Errors[path] = append(rr.Errors[path], e.Error())
				}
				failed = true
			}
			out.Registry = rr
			if *inject == "" {
				return
			}
			spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
			ir := &injectResult{}
			unresolved, err := reg.InjectDevices(spec, strings.Split(*inject, ",")...)
			ir.Unresolved = unresolved
			if err != nil {
				ir.Error = err.Error()
				failed = true
			}
			ir.Devices = spec.Linux.Devices
			if spec.Linux.Resources != nil {
				ir.CgroupDevices = spec.Linux.Resources.Devices
			}
			ir.Env = spec.Process.Env
			ir.Hooks = spec.Hooks
			out.Inject = ir
		}()
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}
