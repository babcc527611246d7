package bench

import "github.com/wafguard/wafguard/internal/benchreq"

// The traffic the bench replays is generated in internal/benchreq, the one
// home of the benchmark requests (the per-request benchmarks in filter/ and
// perf/ use the same pool). These names are that package's, for the bench's
// own code.
type (
	Class   = benchreq.Class
	Request = benchreq.Request
	Pool    = benchreq.Pool
	Mix     = benchreq.Mix
)

// Classes and the pool's fixed values, as in benchreq.
const (
	BenignGET  = benchreq.BenignGET
	BenignJSON = benchreq.BenignJSON
	Attack     = benchreq.Attack
	numClasses = benchreq.NumClasses
	Host       = benchreq.Host
)

var (
	DefaultMix = benchreq.DefaultMix
	NewPool    = benchreq.NewPool
)
