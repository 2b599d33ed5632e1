//go:build linux

package faults

import "github.com/distlock/distlock/sandbox"

// sandboxProxy adapts sandbox.Proxy, the shared fault proxy, to netFault.
type sandboxProxy struct{ *sandbox.Proxy }

func (p sandboxProxy) Partition() { p.Blackhole(sandbox.Both) }

func init() {
	newProxy = func(target func() string) (netFault, error) {
		p, err := sandbox.StartProxy(target)
		if err != nil {
			return nil, err
		}
		return sandboxProxy{p}, nil
	}
}
