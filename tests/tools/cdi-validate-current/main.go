// SPDX-License-Identifier: MIT
//
// cdi-validate (current): tests/tools/cdi-validate's command line and JSON output, against the
// current reference CDI library from the Go module proxy (tags.cncf.io/container-device-interface,
// the version go.mod pins). The JSON schema is no longer part of that module (and not on the
// proxy), so a spec is checked by the library's own validation, as current runtimes load it.
//
//	cdi-validate [-dir DIR] [-inject NAME,NAME...] [SPEC...]
//
// Output and exit status: see tests/tools/cdi-validate/main.go.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"tags.cncf.io/container-device-interface/pkg/cdi"
	"tags.cncf.io/container-device-interface/pkg/parser"
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
		res.Devices = append(res.Devices, parser.QualifiedName(spec.GetVendor(), spec.GetClass(), d.Name))
	}
	return res
}

func registry(dir, inject string) (rr *registryResult, ir *injectResult, failed bool) {
	defer func() {
		if p := recover(); p != nil {
			failed = true
			rr = &registryResult{Devices: []string{},
				Errors: map[string][]string{dir: {fmt.Sprintf("panic: %v", p)}}}
		}
	}()
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dir), cdi.WithAutoRefresh(false))
	if cache == nil {
		return &registryResult{Devices: []string{},
			Errors: map[string][]string{dir: {err.Error()}}}, nil, true
	}
	// Refresh's error is what GetErrors lists per file; runtimes only warn on it.
	_ = cache.Refresh()
	rr = &registryResult{Devices: cache.ListDevices(), Errors: map[string][]string{}}
	if rr.Devices == nil {
		rr.Devices = []string{}
	}
	sort.Strings(rr.Devices)
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			rr.Errors[path] = append(rr.Errors[path], e.Error())
		}
		failed = true
	}
	if inject == "" {
		return rr, nil, failed
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	ir = &injectResult{}
	unresolved, err := cache.InjectDevices(spec, strings.Split(inject, ",")...)
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
	return rr, ir, failed
}

func main() {
	dir := flag.String("dir", "", "refresh a registry over this spec directory")
	inject := flag.String("inject", "", "comma-separated qualified device names to inject (needs -dir)")
	flag.Parse()
	if flag.NArg() == 0 && *dir == "" || *inject != "" && *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: cdi-validate [-dir DIR] [-inject NAME,...] [SPEC...]")
		os.Exit(2)
	}

	failed := false
	out := result{Specs: []specResult{}}
	for _, p := range flag.Args() {
		r := readSpec(p)
		failed = failed || !r.OK
		out.Specs = append(out.Specs, r)
	}
	if *dir != "" {
		rr, ir, f := registry(*dir, *inject)
		out.Registry, out.Inject = rr, ir
		failed = failed || f
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
