package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/patrdb/patrdb/api"
	"github.com/patrdb/patrdb/model"
	"github.com/patrdb/patrdb/rollout"
)

// Client is a client of one server. See the package doc for what is safe
// to share and what is retried.
type Client struct {
	Base    string       // e.g. "http://127.0.0.1:7878"
	Token   string       // bearer token, if the server needs one
	HTTP    *http.Client // nil: a client with a 60 s timeout
	Retries int          // extra attempts after a network error or 5xx (default 0)
	Backoff time.Duration
	// CheckWait bounds how long a request waits out 503 "checking", the
	// server's answer while it checks a run before its first use (minutes
	// on a big file not in the page cache). Those answers are retried
	// after their Retry-After without counting against Retries. Zero
	// means DefaultCheckWait; a negative value does not wait.
	CheckWait time.Duration
	// SkipVersionCheck turns off the check of the server's API version
	// that a client makes before its first request.
	SkipVersionCheck bool

	mu      sync.Mutex
	version string // the server's API version, once checked
}

// DefaultCheckWait is Client.CheckWait's default.
const DefaultCheckWait = 30 * time.Minute

// New returns a client of the server at base.
//
// Its HTTP client does not ask for gzip-encoded replies: between a trainer
// and its server (a loopback, a cluster's network) compressing megabytes of
// trajectories costs both ends more CPU than the bytes saved; give HTTP a
// client of your own (http.DefaultTransport asks for gzip) across a slow
// link.
func New(base string) *Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DisableCompression = true
	return &Client{Base: strings.TrimRight(base, "/"), HTTP: &http.Client{Timeout: 60 * time.Second, Transport: t},
		Backoff: 100 * time.Millisecond}
}

// APIError is a non-2xx answer. It matches model.ErrNotFound (404),
// api.ErrConflict and rollout.ErrConflict (409), the protocol's kinds of
// conflict by their codes (rollout.ErrLeaseLost: "lease_lost", ...),
// model.ErrExists ("exists") and api.ErrBadRequest (400, 413, 415) with
// errors.Is.
type APIError struct {
	Status  int
	Code    string
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message) }

// Is maps the status and code to the sentinels of the API and the store.
func (e *APIError) Is(target error) bool {
	switch target {
	case model.ErrNotFound:
		return e.Status == http.StatusNotFound
	case api.ErrConflict, rollout.ErrConflict:
		return e.Status == http.StatusConflict
	case model.ErrExists:
		return e.Code == "exists"
	case api.ErrBadRequest:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusUnsupportedMediaType
	}
	for _, k := range api.ConflictCodes {
		if target == k.Err {
			return e.Status == http.StatusConflict && e.Code == k.Code
		}
	}
	return false
}

// NewKey returns a random client key.
func NewKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// do checks the server's API version (once), then sends the request.
func (c *Client) do(ctx context.Context, method, path string, in any, out any) error {
	if _, err := c.APIVersion(ctx); err != nil {
		return err
	}
	return c.send(ctx, method, path, in, out)
}

// send is one request, retried as the package doc says.
func (c *Client) send(ctx context.Context, method, path string, in any, out any) error {
	var body []byte
	contentType := "application/json"
	if e, ok := in.(encoded); ok {
		body, contentType = e.body, e.contentType
	} else if in != nil {
		if k, ok := in.(api.KeyedRequest); ok && *k.Key() == "" {
			*k.Key() = NewKey()
		}
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	framed, _ := out.(framedReply)
	bin, _ := out.(*binaryReply)
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	var (
		last          error
		checkingUntil time.Time // set by the first "checking" answer
		pause         time.Duration
	)
	for attempt := 0; attempt <= c.Retries; attempt++ {
		if pause == 0 && attempt > 0 {
			pause = c.Backoff << (attempt - 1)
		}
		if pause > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(pause):
			}
		}
		pause = 0
		req, err := http.NewRequestWithContext(ctx, method, c.Base+path, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if in != nil {
			req.Header.Set("Content-Type", contentType)
		}
		if framed != nil {
			// JSON still answers errors, and every answer of a server
			// older than api.FrameSince.
			req.Header.Set("Accept", api.FrameType+", application/json;q=0.9")
		}
		if bin != nil && bin.accept != "" {
			req.Header.Set("Accept", bin.accept)
		}
		if c.Token != "" {
			req.Header.Set("Authorization", "Bearer "+c.Token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			if ctx.Err() != nil {
				return err
			}
			continue
		}
		data, err := readBody(resp)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode >= 300 {
			var eb api.ErrorBody
			_ = json.Unmarshal(data, &eb)
			if eb.Error == "" {
				eb.Error = strings.TrimSpace(string(data))
			}
			last = &APIError{Status: resp.StatusCode, Code: eb.Code, Message: eb.Error}
			if resp.StatusCode == http.StatusServiceUnavailable && eb.Code == "checking" {
				if checkingUntil.IsZero() {
					checkingUntil = time.Now().Add(c.checkWait())
				}
				if left := time.Until(checkingUntil); left > 0 {
					pause = min(retryAfter(resp.Header.Get("Retry-After")), left)
					attempt-- // a check under way is waited out, not retried
					continue
				}
			}
			if resp.StatusCode >= 500 {
				continue
			}
			return last
		}
		if out == nil {
			return nil
		}
		if bin != nil {
			bin.body = data
			bin.mediaType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
			return nil
		}
		if framed != nil {
			if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == api.FrameType {
				if err := framed.readFrame(data); err != nil {
					return fmt.Errorf("patrdb client: decoding %s %s: %w", method, path, err)
				}
				return nil
			}
			out = framed.jsonTarget()
		}
		if err := unmarshalReply(data, out); err != nil {
			return fmt.Errorf("patrdb client: decoding %s %s: %w", method, path, err)
		}
		return nil
	}
	return last
}

// unmarshalReply decodes a JSON answer. json v2 decodes in one pass where
// encoding/json scans the body whole first: a lease of LLM-turn histories
// decodes several times faster. Names match as encoding/json matched them.
func unmarshalReply(data []byte, out any) error {
	return jsonv2.Unmarshal(data, out, jsonv2.MatchCaseInsensitiveNames(true))
}

func (c *Client) checkWait() time.Duration {
	if c.CheckWait == 0 {
		return DefaultCheckWait
	}
	return c.CheckWait
}

// retryAfter is the pause a Retry-After header of seconds asks for, 1 to
// 30 s; 2 s when it is absent or a date.
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(h)
	if err != nil {
		return 2 * time.Second
	}
	return time.Duration(min(max(n, 1), 30)) * time.Second
}

func runPath(run string, rest ...string) string {
	p := "/api/v1/runs/" + url.PathEscape(run)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func u64(x uint64) string { return strconv.FormatUint(x, 10) }

// Health is GET /api/v1/health.
func (c *Client) Health(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.send(ctx, http.MethodGet, "/api/v1/health", nil, &h) // answers before the version check, so it can tell whether a server is up
}

// Runs is GET /api/v1/runs.
func (c *Client) Runs(ctx context.Context) ([]api.RunSummary, error) {
	return c.RunsWith(ctx, model.SummaryOptions{})
}

// RunsWith is GET /api/v1/runs with what o asks for beyond the totals.
func (c *Client) RunsWith(ctx context.Context, o model.SummaryOptions) ([]api.RunSummary, error) {
	var out struct {
		Runs []api.RunSummary `json:"runs"`
	}
	return out.Runs, c.do(ctx, http.MethodGet, "/api/v1/runs"+summaryQuery(o), nil, &out)
}

// Run is GET /api/v1/runs/{run}.
func (c *Client) Run(ctx context.Context, run string) (api.RunSummary, error) {
	return c.RunWith(ctx, run, model.SummaryOptions{})
}

// RunWith is GET /api/v1/runs/{run} with what o asks for beyond the
// totals.
func (c *Client) RunWith(ctx context.Context, run string, o model.SummaryOptions) (api.RunSummary, error) {
	var out api.RunSummary
	return out, c.do(ctx, http.MethodGet, runPath(run)+summaryQuery(o), nil, &out)
}

func summaryQuery(o model.SummaryOptions) string {
	q := url.Values{}
	if o.Steps {
		q.Set("steps", "true")
	}
	if o.Buckets {
		q.Set("buckets", "true")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// Steps is GET /api/v1/runs/{run}/steps.
func (c *Client) Steps(ctx context.Context, run string) ([]model.StepMetrics, error) {
	var out struct {
		Steps []model.StepMetrics `json:"steps"`
	}
	return out.Steps, c.do(ctx, http.MethodGet, runPath(run, "steps"), nil, &out)
}

// Groups is GET /api/v1/runs/{run}/groups?step=N (0: every step).
func (c *Client) Groups(ctx context.Context, run string, step uint64) ([]model.Group, error) {
	var out struct {
		Groups []model.Group `json:"groups"`
	}
	return out.Groups, c.do(ctx, http.MethodGet, runPath(run, "groups")+"?step="+u64(step), nil, &out)
}

// Tree is GET /api/v1/runs/{run}/groups/{group}.
func (c *Client) Tree(ctx context.Context, run string, group uint64) (api.GroupTree, error) {
	var out api.GroupTree
	return out, c.do(ctx, http.MethodGet, runPath(run, "groups", u64(group)), nil, &out)
}

// Node is GET /api/v1/runs/{run}/nodes/{node}.
func (c *Client) Node(ctx context.Context, run string, node uint64) (api.NodeInfo, error) {
	var out api.NodeInfo
	return out, c.do(ctx, http.MethodGet, runPath(run, "nodes", u64(node)), nil, &out)
}

// Trajectory is GET /api/v1/runs/{run}/nodes/{node}/trajectory.
func (c *Client) Trajectory(ctx context.Context, run string, node uint64) (api.Trajectory, error) {
	var out api.Trajectory
	return out, c.do(ctx, http.MethodGet, runPath(run, "nodes", u64(node), "trajectory")+c.tokensQuery(ctx, "?"), nil, &out)
}

// Frontier is GET /api/v1/runs/{run}/frontier (step 0: every step).
func (c *Client) Frontier(ctx context.Context, run string, step uint64) ([]model.Node, error) {
	var out struct {
		Nodes []model.Node `json:"nodes"`
	}
	return out.Nodes, c.do(ctx, http.MethodGet, runPath(run, "frontier")+"?step="+u64(step), nil, &out)
}

// Rubrics is GET /api/v1/runs/{run}/rubrics?pool= ("" or "all": every pool).
func (c *Client) Rubrics(ctx context.Context, run string, pool model.RubricPool) ([]model.Rubric, error) {
	var out struct {
		Rubrics []model.Rubric `json:"rubrics"`
	}
	return out.Rubrics, c.do(ctx, http.MethodGet, runPath(run, "rubrics")+"?pool="+url.QueryEscape(string(pool)), nil, &out)
}

// Advantages is GET /api/v1/runs/{run}/advantages (0: every step / group).
func (c *Client) Advantages(ctx context.Context, run string, step, group uint64) ([]model.Advantage, error) {
	var out struct {
		Advantages []model.Advantage `json:"advantages"`
	}
	q := "?step=" + u64(step)
	if group != 0 {
		q += "&group=" + u64(group)
	}
	return out.Advantages, c.do(ctx, http.MethodGet, runPath(run, "advantages")+q, nil, &out)
}

// Events is one page of GET /api/v1/runs/{run}/events.
func (c *Client) Events(ctx context.Context, run string, from uint64, limit int) (api.EventPage, error) {
	var out api.EventPage
	return out, c.do(ctx, http.MethodGet, runPath(run, "events")+fmt.Sprintf("?from=%d&limit=%d", from, limit), nil, &out)
}

// Checkpoint is GET /api/v1/runs/{run}/checkpoint (step 0: the latest).
func (c *Client) Checkpoint(ctx context.Context, run string, step uint64) (model.Checkpoint, error) {
	var out struct {
		Checkpoint model.Checkpoint `json:"checkpoint"`
	}
	return out.Checkpoint, c.do(ctx, http.MethodGet, runPath(run, "checkpoint")+"?step="+u64(step), nil, &out)
}

// Stats is GET /api/v1/stats ("" for every run). A damaged run is listed
// with its Damaged reason and zero figures, beside the others; asked for
// alone, it is an *APIError with code "damaged".
func (c *Client) Stats(ctx context.Context, run string) (api.Stats, error) {
	var out api.Stats
	q := ""
	if run != "" {
		q = "?run=" + url.QueryEscape(run)
	}
	return out, c.do(ctx, http.MethodGet, "/api/v1/stats"+q, nil, &out)
}

// CreateRun is POST /api/v1/runs.
func (c *Client) CreateRun(ctx context.Context, req api.CreateRunRequest) (api.RunJSON, error) {
	var out api.CreateRunResponse
	return out.Run, c.do(ctx, http.MethodPost, "/api/v1/runs", &req, &out)
}

// SetRunStatus is POST /api/v1/runs/{run}/status.
func (c *Client) SetRunStatus(ctx context.Context, run string, req api.RunStatusRequest) (api.RunJSON, error) {
	var out api.CreateRunResponse
	return out.Run, c.do(ctx, http.MethodPost, runPath(run, "status"), &req, &out)
}

// PutCheckpoint is POST /api/v1/runs/{run}/checkpoints.
func (c *Client) PutCheckpoint(ctx context.Context, run string, req api.CheckpointRequest) (api.CheckpointResponse, error) {
	var out api.CheckpointResponse
	return out, c.do(ctx, http.MethodPost, runPath(run, "checkpoints"), &req, &out)
}

// OpenStep is POST /api/v1/runs/{run}/steps.
func (c *Client) OpenStep(ctx context.Context, run string, req api.OpenStepRequest) (api.OpenStepResponse, error) {
	var out api.OpenStepResponse
	return out, c.do(ctx, http.MethodPost, runPath(run, "steps"), &req, &out)
}

// Lease is POST /api/v1/runs/{run}/leases. The answer comes as a frame
// (api.FrameType) from a server that writes them, its histories packed
// from one of api.PackedSince on.
func (c *Client) Lease(ctx context.Context, run string, req api.LeaseRequest) ([]api.LeaseGrant, error) {
	var out api.LeaseResponse
	return out.Leases, c.do(ctx, http.MethodPost, runPath(run, "leases")+c.tokensQuery(ctx, "?"), &req, leaseReply{&out})
}

// Submit is POST /api/v1/runs/{run}/submit. It goes as a frame
// (api.FrameType) to a server that reads them, with its token arrays
// packed to one of api.PackedSince on.
func (c *Client) Submit(ctx context.Context, run string, req api.SubmitRequest) (rollout.Submitted, error) {
	var out rollout.Submitted
	if req.ClientKey == "" { // before packing: the packed body hides the key
		req.ClientKey = NewKey()
	}
	var body any = &req
	switch {
	case c.speaks(ctx, api.FrameSince):
		b, err := api.SubmitFrame(req)
		if err != nil {
			return out, err
		}
		body = encoded{contentType: api.FrameType, body: b}
	case c.packed(ctx):
		body = api.Packed(req)
	}
	return out, c.do(ctx, http.MethodPost, runPath(run, "submit"), body, &out)
}

// encoded is a request body written ahead, with its media type.
type encoded struct {
	contentType string
	body        []byte
}

// binaryReply is a binary answer (a batch file, a batch source) and the
// media type it came as; accept, when set, is the request's Accept.
type binaryReply struct {
	accept    string
	body      []byte
	mediaType string
}

// framedReply is an answer asked for as a frame (Accept: api.FrameType)
// and read from what the server sent: the frame, or JSON into jsonTarget.
type framedReply interface {
	readFrame(body []byte) error
	jsonTarget() any
}

type leaseReply struct{ out *api.LeaseResponse }

func (l leaseReply) readFrame(body []byte) (err error) {
	*l.out, err = api.ReadLeaseFrame(body, unmarshalReply)
	return err
}

func (l leaseReply) jsonTarget() any { return l.out }

// packed reports whether the server reads and writes packed token arrays
// (API version api.PackedSince or later).
func (c *Client) packed(ctx context.Context) bool { return c.speaks(ctx, api.PackedSince) }

// speaks reports whether the server's API version is version or later.
func (c *Client) speaks(ctx context.Context, version string) bool {
	v, err := c.APIVersion(ctx)
	return err == nil && v != "" && versionAtLeast(v, version)
}

// tokensQuery is the query that asks for packed turns (after sep), or "".
func (c *Client) tokensQuery(ctx context.Context, sep string) string {
	if c.packed(ctx) {
		return sep + "tokens=" + api.TokensPacked
	}
	return ""
}

// versionAtLeast compares "<major>.<minor>" versions.
func versionAtLeast(v, want string) bool {
	num := func(s string) (int, int) {
		a, b, _ := strings.Cut(s, ".")
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x, y
	}
	vm, vn := num(v)
	wm, wn := num(want)
	return vm > wm || (vm == wm && vn >= wn)
}

// RenewLeases is POST /api/v1/runs/{run}/leases/renew: a heartbeat for
// the leases worker holds.
func (c *Client) RenewLeases(ctx context.Context, run string, req api.LeasesRequest) ([]rollout.LeaseState, error) {
	var out api.LeasesResponse
	return out.Leases, c.do(ctx, http.MethodPost, runPath(run, "leases", "renew"), &req, &out)
}

// ReleaseLeases is POST /api/v1/runs/{run}/leases/release.
func (c *Client) ReleaseLeases(ctx context.Context, run string, req api.LeasesRequest) ([]rollout.LeaseState, error) {
	var out api.LeasesResponse
	return out.Leases, c.do(ctx, http.MethodPost, runPath(run, "leases", "release"), &req, &out)
}

// Publish is POST /api/v1/runs/{run}/version: the run's current policy
// version moves to req.Version.
func (c *Client) Publish(ctx context.Context, run string, req api.PublishRequest) (api.RunJSON, error) {
	var out api.CreateRunResponse
	return out.Run, c.do(ctx, http.MethodPost, runPath(run, "version"), &req, &out)
}

// SubmitRewards is POST /api/v1/runs/{run}/rewards.
func (c *Client) SubmitRewards(ctx context.Context, run string, req api.RewardsRequest) (rollout.Submitted, error) {
	var out rollout.Submitted
	return out, c.do(ctx, http.MethodPost, runPath(run, "rewards"), &req, &out)
}

// SubmitScores is POST /api/v1/runs/{run}/scores.
func (c *Client) SubmitScores(ctx context.Context, run string, req api.ScoresRequest) (rollout.Submitted, error) {
	var out rollout.Submitted
	return out, c.do(ctx, http.MethodPost, runPath(run, "scores"), &req, &out)
}

// Pending is GET /api/v1/runs/{run}/steps/{step}/pending, with each
// branch's path when withHistory.
func (c *Client) Pending(ctx context.Context, run string, step uint64, withHistory bool) (api.PendingResponse, error) {
	var out api.PendingResponse
	q := "?history=0"
	if withHistory {
		q = "?history=1"
	}
	return out, c.do(ctx, http.MethodGet, runPath(run, "steps", u64(step), "pending")+q+c.tokensQuery(ctx, "&"), nil, &out)
}

// CloseGroup is POST /api/v1/runs/{run}/groups/{group}/close.
func (c *Client) CloseGroup(ctx context.Context, run string, group uint64, req api.CloseGroupRequest) (api.CloseGroupResponse, error) {
	var out api.CloseGroupResponse
	return out, c.do(ctx, http.MethodPost, runPath(run, "groups", u64(group), "close"), &req, &out)
}

// AbandonStep is POST /api/v1/runs/{run}/steps/{step}/abandon.
func (c *Client) AbandonStep(ctx context.Context, run string, step uint64, req api.AbandonRequest) (api.OpenStepResponse, error) {
	var out api.OpenStepResponse
	return out, c.do(ctx, http.MethodPost, runPath(run, "steps", u64(step), "abandon"), &req, &out)
}

// StepStatus is GET /api/v1/runs/{run}/steps/{step}/status.
func (c *Client) StepStatus(ctx context.Context, run string, step uint64) (rollout.StepStatus, error) {
	var out rollout.StepStatus
	return out, c.do(ctx, http.MethodGet, runPath(run, "steps", u64(step), "status"), nil, &out)
}

// Activate is POST /api/v1/runs/{run}/rubrics/activate.
func (c *Client) Activate(ctx context.Context, run string, req api.ActivateRequest) (api.ActiveRubrics, error) {
	var out api.ActiveRubrics
	return out, c.do(ctx, http.MethodPost, runPath(run, "rubrics", "activate"), &req, &out)
}

// ActiveRubrics is GET /api/v1/runs/{run}/rubrics/active?step=N.
func (c *Client) ActiveRubrics(ctx context.Context, run string, step uint64) (api.ActiveRubrics, error) {
	var out api.ActiveRubrics
	return out, c.do(ctx, http.MethodGet, runPath(run, "rubrics", "active")+"?step="+u64(step), nil, &out)
}

// Shape is POST /api/v1/runs/{run}/groups/{group}/shape (writes nothing).
func (c *Client) Shape(ctx context.Context, run string, group uint64, ans api.ShapeAnswers) (api.ShapeResponse, error) {
	var out api.ShapeResponse
	return out, c.do(ctx, http.MethodPost, runPath(run, "groups", u64(group), "shape"), api.ShapeRequest{ShapeAnswers: ans}, &out)
}

// readBody reads a reply whole into one buffer sized from its
// Content-Length (up to 1 GiB ahead, growing past it), so a batch file of
// hundreds of MB is not copied through io.ReadAll's doubling buffers: that
// had been most of Client.Batch's time.
func readBody(resp *http.Response) ([]byte, error) {
	size := int64(0)
	if resp.ContentLength > 0 {
		size = min(resp.ContentLength, 1<<30)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+bytes.MinRead))
	_, err := buf.ReadFrom(resp.Body)
	return buf.Bytes(), err
}
