package lbpolicy

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goxds/xds/dataplane/endpoint"
	"github.com/goxds/xds/resources"
)

// LoadReport is what an endpoint says of its load (gRPC's ORCA report,
// gRFC A51), in the terms weighted_round_robin weighs it by (gRFC A58).
type LoadReport struct {
	// QPS and EPS are the requests and the errors per second the
	// endpoint served.
	QPS, EPS float64
	// ApplicationUtilization, if not 0, is the endpoint's utilization as
	// its application sees it, preferred to CPUUtilization.
	ApplicationUtilization, CPUUtilization float64
}

// EndpointWeight is weighted_round_robin's weight of one endpoint, from its
// load reports (gRFC A58): QPS / (utilization + EPS/QPS × the error
// utilization penalty), used only once the endpoint has reported for the
// blackout period, and no longer once its last report is older than the
// expiration period. Reports come from any goroutine (the end of a
// request, an out-of-band stream): it has a lock of its own.
type EndpointWeight struct {
	mu    sync.Mutex
	clock Clock
	// penalty is error_utilization_penalty; weight the last report's
	// weight; nonEmptySince when the reports in a row began (zero: none
	// since the connection or since they expired); lastUpdated the last
	// report's time.
	penalty                    float64
	weight                     float64
	nonEmptySince, lastUpdated time.Time

	// ready: the endpoint was ready when its leaf last looked (guarded by
	// the owner's lock): one becoming ready again starts with no weight,
	// its reports from before being of another connection.
	ready bool
}

// Report records a load report of the endpoint. One with no QPS or no
// utilization says nothing of its weight, and is ignored.
func (w *EndpointWeight) Report(r LoadReport) {
	util := r.ApplicationUtilization
	if util == 0 {
		util = r.CPUUtilization
	}
	if util <= 0 || r.QPS <= 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.weight = r.QPS / (util + r.EPS/r.QPS*w.penalty)
	if w.clock == nil {
		w.clock = RealClock{}
	}
	w.lastUpdated = w.clock.Now()
	if w.nonEmptySince.IsZero() {
		w.nonEmptySince = w.lastUpdated
	}
}

// value returns the weight to use at now by cfg, 0 for none (no report
// yet, in its blackout, or expired).
func (w *EndpointWeight) value(now time.Time, cfg *resources.WRRConfig) float64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.lastUpdated.IsZero():
		return 0
	case now.Sub(w.lastUpdated) >= cfg.WeightExpirationPeriod:
		// Reports that start again sit out the blackout again.
		w.nonEmptySince = time.Time{}
		return 0
	case cfg.BlackoutPeriod > 0 && (w.nonEmptySince.IsZero() || now.Sub(w.nonEmptySince) < cfg.BlackoutPeriod):
		return 0
	}
	return w.weight
}

// reset forgets the reports: the endpoint has a new connection.
func (w *EndpointWeight) reset() {
	w.mu.Lock()
	w.nonEmptySince, w.lastUpdated = time.Time{}, time.Time{}
	w.mu.Unlock()
}

// LoadWatcher is what a transport's connection (endpoint.Conn) offers if
// it can carry out-of-band load reports (grpcxds: grpc-go's
// orca.RegisterOOBListener on the SubConn), for weighted_round_robin's
// enable_oob_load_report: WatchLoad starts the reports, asked for every
// period, each handed to w.Report, until stop is called. It is called,
// and stop too, under the owner's lock. (A method of the connection, not
// a field of the Leaf: the transport that made the one has the other.)
type LoadWatcher interface {
	WatchLoad(period time.Duration, w *EndpointWeight) (stop func())
}

// wrrEndpoint is what a leaf keeps of an endpoint weighted_round_robin
// has seen ready: its weight, and its out-of-band watch if one runs.
type wrrEndpoint struct {
	w    *EndpointWeight
	stop func()
}

// Close stops what the leaf runs: its out-of-band load watches, its
// weighted_round_robin pickers' weight updates and pick_first's turn. The
// owner calls it when it lets the leaf go.
func (l *Leaf) Close() {
	for _, g := range l.groups {
		for _, e := range g.weights {
			if e.stop != nil {
				e.stop()
				e.stop = nil
			}
		}
		g.stopTimer()
		if g.wrr != nil {
			g.wrr.stopped.Store(true)
		}
	}
}

// wrrPicker returns weighted_round_robin's picker over ready, g's ready
// endpoints, with the weights the leaf keeps for them, starting the
// out-of-band watch of those newly ready if the policy asks for them.
func (l *Leaf) wrrPicker(g *group, ready []Picked) Picker {
	cfg := &l.Policy.WRR
	if g.weights == nil {
		g.weights = make(map[*endpoint.Endpoint]*wrrEndpoint)
	}
	p := &wrrPicker{eps: ready, weights: make([]*EndpointWeight, len(ready)), cfg: cfg, clock: l.clock()}
	for i := range ready {
		ep := ready[i].Endpoint
		e := g.weights[ep]
		if e == nil {
			var w *EndpointWeight
			if l.Before != nil {
				w = l.Before.Weights[ep]
			}
			if w == nil {
				w = &EndpointWeight{}
			}
			w.mu.Lock()
			w.clock, w.penalty = p.clock, cfg.ErrorUtilizationPenalty
			w.mu.Unlock()
			e = &wrrEndpoint{w: w}
			g.weights[ep] = e
		}
		if !e.w.ready {
			e.w.ready = true
			e.w.reset()
		}
		if cfg.EnableOOBLoadReport {
			if lw, ok := ready[i].Conn.(LoadWatcher); ok && e.stop == nil {
				e.stop = lw.WatchLoad(cfg.OOBReportingPeriod, e.w)
			}
		} else {
			ready[i].Load = e.w
		}
		p.weights[i] = e.w
	}
	for ep, e := range g.weights {
		if e.w.ready && !ep.Ready() {
			e.w.ready = false
			if e.stop != nil {
				e.stop()
				e.stop = nil
			}
		}
	}
	p.seq.Store(rand.Uint64()) // pickers are rebuilt often: start anywhere
	p.sched.Store(p.schedule())
	if g.wrr != nil {
		g.wrr.stopped.Store(true)
	}
	g.wrr = p
	return p
}

// wrrPicker picks endpoints in proportion to their weights. Its schedule
// is made anew every weight_update_period while it is picking: its timer
// runs only while picks come (the first pick after a quiet period starts
// it again), and stops for good once the leaf replaces the picker.
type wrrPicker struct {
	eps     []Picked
	weights []*EndpointWeight
	cfg     *resources.WRRConfig
	clock   Clock

	seq   atomic.Uint64
	sched atomic.Pointer[wrrSchedule]
	// used: a pick came since the last update; ticking: an update is due;
	// stopped: the leaf has another picker.
	used, ticking, stopped atomic.Bool
}

func (p *wrrPicker) Pick(uint64) (Picked, error) {
	if !p.used.Load() { // once per update period: no write shared by every pick
		p.used.Store(true)
		p.arm()
	}
	return p.eps[p.sched.Load().next(&p.seq)], nil
}

// arm sets the timer of the next update, unless set.
func (p *wrrPicker) arm() {
	if !p.stopped.Load() && p.ticking.CompareAndSwap(false, true) {
		p.clock.AfterFunc(p.cfg.WeightUpdatePeriod, p.update)
	}
}

// update makes the schedule anew, and sets the next update if picks came
// since the last one. (ticking is cleared before used is read: a pick
// that sets used after that arms the timer itself.)
func (p *wrrPicker) update() {
	p.sched.Store(p.schedule())
	p.ticking.Store(false)
	if p.used.Swap(false) {
		p.arm()
	}
}

// wrrMax is the largest weight of a schedule: the others are scaled to it.
const wrrMax = math.MaxUint16

// schedule returns the schedule of the endpoints' weights now: an
// endpoint without one (no reports yet, or too few, or too old) takes the
// mean of the others'; with fewer than two weights, or all equal, a round
// robin.
func (p *wrrPicker) schedule() *wrrSchedule {
	if len(p.eps) < 2 {
		return &wrrSchedule{n: uint64(len(p.eps))}
	}
	now := p.clock.Now()
	ws := make([]float64, len(p.weights))
	var sum, top float64
	known := 0
	for i, w := range p.weights {
		ws[i] = w.value(now, p.cfg)
		if ws[i] > 0 {
			sum += ws[i]
			top = max(top, ws[i])
			known++
		}
	}
	s := &wrrSchedule{n: uint64(len(ws))}
	if known < 2 {
		return s
	}
	scale := wrrMax / top
	mean := scaled(scale * sum / float64(known))
	s.weights = make([]uint64, len(ws))
	equal := true
	for i, w := range ws {
		s.weights[i] = mean
		if w > 0 {
			s.weights[i] = scaled(scale * w)
		}
		equal = equal && s.weights[i] == s.weights[0]
	}
	if equal {
		s.weights = nil
	}
	return s
}

// scaled rounds a scaled weight, at least 1: no endpoint is starved.
func scaled(w float64) uint64 { return uint64(max(1, math.Round(w))) }

// wrrSchedule is a weighted schedule without a lock (gRFC A58's static
// stride scheduler): a sequence number names an endpoint (its remainder
// by n) and a round (its quotient); in each round an endpoint of weight w
// takes its turn or passes, taking w turns in every wrrMax rounds, spread
// evenly by a stride of w through the rounds. The endpoint of the largest
// weight never passes, so a pick looks at most len(weights) numbers on
// average. Without weights, a round robin.
type wrrSchedule struct {
	n       uint64
	weights []uint64 // nil: round robin
}

func (s *wrrSchedule) next(seq *atomic.Uint64) int {
	if s.weights == nil {
		return int(seq.Add(1) % s.n)
	}
	for {
		x := seq.Add(1)
		i, round := x%s.n, x/s.n
		w := s.weights[i]
		// Each endpoint's turns are offset by half the range times its
		// index, so that two of equal weight do not pass in the same
		// rounds.
		if (w*(round%wrrMax)+i*(wrrMax/2))%wrrMax >= wrrMax-w {
			return int(i)
		}
	}
}
