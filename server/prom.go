package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/patrdb/patrdb/store"
)

// promMetrics are the handler's Prometheus metrics, in a registry of its
// own so two handlers in one process never collide.
type promMetrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	batch    prometheus.Histogram
	handler  http.Handler
}

func newPromMetrics(db *store.DB) *promMetrics {
	m := &promMetrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "patrdb_http_requests_total",
		Help: "HTTP requests answered, by route (the endpoint's pattern, \"none\" when no route matched) and status code.",
	}, []string{"route", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "patrdb_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route"})
	m.batch = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "patrdb_write_batch_requests",
		Help:    "Write requests committed together in one transaction (one fsync), per commit: its count is the commits, its sum the requests they committed.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	m.reg.MustRegister(m.requests, m.latency, m.batch, storeCollector{db},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

func (m *promMetrics) observe(route string, code int, d time.Duration) {
	if route == "" {
		route = "none" // refused before routing: a wrong Host or token
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) error {
	s.ops.prom.handler.ServeHTTP(w, r)
	return nil
}

// storeCollector reports the store's own figures at each scrape, read in
// one read transaction: nothing is kept in between.
type storeCollector struct{ db *store.DB }

var (
	descFileBytes = prometheus.NewDesc("patrdb_store_file_bytes", "Size of the store file.", nil, nil)
	descRuns      = prometheus.NewDesc("patrdb_store_runs", "Runs in the store.", nil, nil)
	descRunEvents = prometheus.NewDesc("patrdb_run_events", "Events in a run's log (its last sequence number).", []string{"run"}, nil)
	descRunStep   = prometheus.NewDesc("patrdb_run_last_step", "A run's last completed (checkpointed) step.", []string{"run"}, nil)
	descCacheHits = prometheus.NewDesc("patrdb_node_cache_hits_total", "Node reads answered by the node cache since the store opened.", nil, nil)
	descCacheMiss = prometheus.NewDesc("patrdb_node_cache_misses_total", "Node reads the node cache could not answer since the store opened.", nil, nil)
	descCacheLen  = prometheus.NewDesc("patrdb_node_cache_entries", "Nodes held by the node cache.", nil, nil)
)

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFileBytes, descRuns, descRunEvents, descRunStep, descCacheHits, descCacheMiss, descCacheLen} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.db.CacheStats()
	ch <- prometheus.MustNewConstMetric(descCacheHits, prometheus.CounterValue, float64(cs.Hits))
	ch <- prometheus.MustNewConstMetric(descCacheMiss, prometheus.CounterValue, float64(cs.Misses))
	ch <- prometheus.MustNewConstMetric(descCacheLen, prometheus.GaugeValue, float64(cs.Len))
	err := c.db.View(func(tx *store.Tx) error {
		ch <- prometheus.MustNewConstMetric(descFileBytes, prometheus.GaugeValue, float64(tx.Size()))
		runs, err := tx.Runs()
		if err != nil {
			return err
		}
		ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(len(runs)))
		for _, run := range runs {
			r, err := tx.Run(run.ID)
			if err != nil {
				return err
			}
			ch <- prometheus.MustNewConstMetric(descRunEvents, prometheus.GaugeValue, float64(r.LastSeq()), run.ID)
			ch <- prometheus.MustNewConstMetric(descRunStep, prometheus.GaugeValue, float64(run.LastStep), run.ID)
		}
		return nil
	})
	if err != nil {
		// The scrape fails with the reason instead of showing partial figures.
		ch <- prometheus.NewInvalidMetric(descRuns, err)
	}
}
