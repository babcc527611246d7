// Package bench measures the WAF filter beside nginx + ModSecurity v3 and
// native Coraza on one traffic mix, one server after the other, each pinned
// to the same CPU. Command bench/cmd/bench runs it; docs/bench.md explains
// the setup and how to read the results.
//
// The parts:
//   - traffic.go: the seeded pool of benign GETs, benign JSON POSTs and
//     attacks (Pool, NewPool);
//   - servers.go, nginx.go, coraza.go, upstream.go: the servers under test,
//     their configurations and the shared upstream;
//   - proc.go: pinned subprocesses, their CPU time and peak RSS from /proc;
//   - load.go, verify.go: vegeta closed and open loops, the pool check;
//   - report.go, plot.go, font.go: results.md, results.json, latency.png.
//
// # Notes
//
// The bench needs Linux (/proc, taskset, sched_setaffinity), and root to
// install nginx with apt-get when it is missing. Every server it starts is
// in its own process group with Pdeathsig set, and StopAll ends them all.
package bench
