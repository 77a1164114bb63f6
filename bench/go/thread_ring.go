// Command thread_ring is the Go peer of `statepipe bench pipeline`'s thread-ring case:
// the Benchmarks Game program (503 goroutines in a ring, unbuffered channels, one token
// decremented at every hop; the goroutine that receives 0 reports its number).
//
// It runs one untimed warm-up, then -samples timed rings of -hops hops each, checks
// every answer against hops%503+1 (exit 1 if one is wrong), prints progress to stderr
// and one JSON document on stdout, in the shape of statepipe's bench reports:
//
//	{"bench": "pipeline", "host": {...}, "results": [{"case": "thread-ring/503", "impl": "go", ...}]}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// stages is the ring's size, fixed by the Benchmarks Game.
const stages = 503

// ring passes a token of hops through a fresh ring of goroutines and returns the
// number of the goroutine that received 0 and the time from the first send until then.
// Every goroutine has returned when ring returns.
func ring(hops int) (int, time.Duration) {
	chans := make([]chan int, stages)
	for i := range chans {
		chans[i] = make(chan int)
	}
	done := make(chan int, 1)
	var ready, exited sync.WaitGroup
	ready.Add(stages)
	exited.Add(stages)
	for i := 0; i < stages; i++ {
		go stage(i+1, chans[i], chans[(i+1)%stages], done, &ready, &exited)
	}
	ready.Wait() // every goroutine started before the clock does
	t0 := time.Now()
	chans[0] <- hops
	id := <-done
	elapsed := time.Since(t0)
	exited.Wait()
	return id, elapsed
}

// stage is goroutine number id: it passes the token on, decremented, until it receives
// 0; then it reports id and closes its output, and the closing ripples around the ring
// (each goroutine closes its output when its input closes), so every goroutine returns.
func stage(id int, in <-chan int, out chan<- int, done chan<- int, ready, exited *sync.WaitGroup) {
	defer exited.Done()
	defer close(out)
	ready.Done()
	for token := range in {
		if token == 0 {
			done <- id
			return
		}
		out <- token - 1
	}
}

// pingpong is the median round trip, in ns, of two goroutines bouncing an atomic
// between two OS threads (the host line of statepipe's reports); 0 with one CPU.
func pingpong() float64 {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	const rounds = 20000
	var flag atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		runtime.LockOSThread()
		for i := 0; i < 5*rounds; i++ {
			for flag.Load() != 1 {
			}
			flag.Store(0)
		}
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	batches := make([]float64, 0, 5)
	for b := 0; b < 5; b++ {
		t0 := time.Now()
		for i := 0; i < rounds; i++ {
			flag.Store(1)
			for flag.Load() != 0 {
			}
		}
		batches = append(batches, float64(time.Since(t0).Nanoseconds())/rounds)
	}
	wg.Wait()
	return median(batches)
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

type hostSummary struct {
	CPUs       int     `json:"cpus"`
	PingpongNs float64 `json:"pingpong_ns"`
}

type resultRow struct {
	Case           string  `json:"case"`
	Impl           string  `json:"impl"`
	Config         string  `json:"config"`
	Unit           string  `json:"unit"`
	HigherIsBetter bool    `json:"higher_is_better"`
	Median         float64 `json:"median"`
	Min            float64 `json:"min"`
	Max            float64 `json:"max"`
	Samples        int     `json:"samples"`
}

type report struct {
	Bench   string      `json:"bench"`
	Host    hostSummary `json:"host"`
	Results []resultRow `json:"results"`
}

func main() {
	hops := flag.Int("hops", 2_000_000, "hops per sample (token passes)")
	samples := flag.Int("samples", 5, "timed samples")
	flag.Parse()
	if *hops < 0 || *samples < 1 {
		fmt.Fprintln(os.Stderr, "thread_ring: -hops must be >= 0 and -samples >= 1")
		os.Exit(2)
	}
	host := hostSummary{CPUs: runtime.NumCPU(), PingpongNs: pingpong()}
	fmt.Fprintf(os.Stderr, "go thread-ring: %s, GOMAXPROCS=%d, %d CPUs, ping-pong %.1f ns\n",
		runtime.Version(), runtime.GOMAXPROCS(0), host.CPUs, host.PingpongNs)

	check := func(hops, id int) {
		if want := hops%stages + 1; id != want {
			fmt.Fprintf(os.Stderr, "go thread-ring: WRONG ANSWER after %d hops: %d, expected %d\n", hops, id, want)
			os.Exit(1)
		}
	}
	warm := min(*hops, 100_000)
	id, _ := ring(warm)
	check(warm, id)

	perHop := make([]float64, 0, *samples)
	for s := 0; s < *samples; s++ {
		id, elapsed := ring(*hops)
		check(*hops, id)
		ns := float64(elapsed.Nanoseconds()) / float64(max(*hops, 1))
		perHop = append(perHop, ns)
		fmt.Fprintf(os.Stderr, "  sample %d: %d hops in %v, %.1f ns/hop, answer %d\n", s+1, *hops, elapsed, ns, id)
	}
	sorted := append([]float64(nil), perHop...)
	sort.Float64s(sorted)
	row := resultRow{
		Case:   "thread-ring/503",
		Impl:   "go",
		Config: fmt.Sprintf("503 goroutines, unbuffered chan; %s, GOMAXPROCS=%d", runtime.Version(), runtime.GOMAXPROCS(0)),
		Unit:   "ns/hop", HigherIsBetter: false,
		Median: median(perHop), Min: sorted[0], Max: sorted[len(sorted)-1], Samples: len(perHop),
	}
	out, err := json.Marshal(report{Bench: "pipeline", Host: host, Results: []resultRow{row}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "thread_ring:", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}
