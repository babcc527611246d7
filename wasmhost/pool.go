package wasmhost

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Pool is the set of VMs of one plugin, one per simulated Envoy worker.
type Pool struct {
	vms  []*VM
	next atomic.Uint64
}

// NewPool starts Options.Concurrency VMs for the plugin, in parallel, each
// with its own instance ("<name>-<n>").
func (m *Module) NewPool(ctx context.Context, cfg PluginConfig) (*Pool, error) {
	n := m.opts.Concurrency
	p := &Pool{vms: make([]*VM, n)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			p.vms[i], errs[i] = m.NewVM(ctx, cfg)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// PoolOf makes a Pool of VMs already started (for a Handler in front of
// them); closing it closes them.
func PoolOf(vms ...*VM) *Pool { return &Pool{vms: vms} }

// VMs returns the pool's VMs.
func (p *Pool) VMs() []*VM { return p.vms }

// Pick returns the next VM, round robin.
func (p *Pool) Pick() *VM {
	return p.vms[int(p.next.Add(1)-1)%len(p.vms)]
}

// Exchange runs one exchange on the next VM.
func (p *Pool) Exchange(ctx context.Context, req *Request, up Upstream) Result {
	return p.Pick().Exchange(ctx, req, up)
}

// Close closes every VM.
func (p *Pool) Close() {
	for _, vm := range p.vms {
		if vm != nil {
			vm.Close()
		}
	}
}
