package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3Lake is a lake under a prefix of an S3-compatible bucket, through
// minio-go. An object is visible only once its upload completes, so each
// file appears whole; files are written locally first, in a private
// staging folder of the temporary directory, then uploaded.
type s3Lake struct {
	cl     *minio.Client
	bucket string
	prefix string // "" or ending in "/"
}

func openS3(bucket, prefix string, getenv func(string) string) (*s3Lake, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	endpoint := getenv("AWS_ENDPOINT_URL_S3")
	if endpoint == "" {
		endpoint = getenv("AWS_ENDPOINT_URL")
	}
	secure, host := true, "s3.amazonaws.com"
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: endpoint %q (AWS_ENDPOINT_URL): want http(s)://host[:port]", ErrURL, endpoint)
		}
		secure, host = u.Scheme == "https", u.Host
	}
	region := getenv("AWS_REGION")
	if region == "" {
		region = getenv("AWS_DEFAULT_REGION")
	}
	var creds *credentials.Credentials
	if id := getenv("AWS_ACCESS_KEY_ID"); id != "" {
		creds = credentials.NewStaticV4(id, getenv("AWS_SECRET_ACCESS_KEY"), getenv("AWS_SESSION_TOKEN"))
	} else {
		chain := []credentials.Provider{&credentials.FileAWSCredentials{
			Filename: getenv("AWS_SHARED_CREDENTIALS_FILE"), Profile: getenv("AWS_PROFILE")}}
		if getenv("AWS_EC2_METADATA_DISABLED") != "true" {
			chain = append(chain, &credentials.IAM{})
		}
		creds = credentials.NewChainCredentials(chain)
	}
	cl, err := minio.New(host, &minio.Options{Creds: creds, Secure: secure, Region: region})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrURL, err)
	}
	if prefix != "" {
		prefix += "/"
	}
	return &s3Lake{cl: cl, bucket: bucket, prefix: prefix}, nil
}

func (s *s3Lake) String() string {
	return "s3://" + s.bucket + "/" + s.prefix
}

func (s *s3Lake) key(k string) string { return s.prefix + k }

// notExist maps S3's missing key or bucket to fs.ErrNotExist.
func notExist(err error) error {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%w: %v", fs.ErrNotExist, err)
	}
	return err
}

// partSize bounds the memory an upload buffers.
const partSize = 16 << 20

func (s *s3Lake) put(ctx context.Context, key, file string) error {
	_, err := s.cl.FPutObject(ctx, s.bucket, s.key(key), file,
		minio.PutObjectOptions{ContentType: "application/vnd.apache.parquet", PartSize: partSize})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", key, err)
	}
	return os.Remove(file)
}

func (s *s3Lake) putBytes(ctx context.Context, key string, b []byte) error {
	_, err := s.cl.PutObject(ctx, s.bucket, s.key(key), bytes.NewReader(b), int64(len(b)),
		minio.PutObjectOptions{ContentType: "application/json"})
	if err != nil {
		return fmt.Errorf("uploading %s: %w", key, err)
	}
	return nil
}

func (s *s3Lake) get(ctx context.Context, key string) ([]byte, error) {
	o, err := s.cl.GetObject(ctx, s.bucket, s.key(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, notExist(err)
	}
	defer o.Close()
	b, err := io.ReadAll(o)
	if err != nil {
		return nil, notExist(err)
	}
	return b, nil
}

type s3Object struct {
	*minio.Object
	n int64
}

func (o s3Object) size() int64 { return o.n }

func (s *s3Lake) open(ctx context.Context, key string) (object, error) {
	o, err := s.cl.GetObject(ctx, s.bucket, s.key(key), minio.GetObjectOptions{})
	if err != nil {
		return nil, notExist(err)
	}
	st, err := o.Stat()
	if err != nil {
		o.Close()
		return nil, notExist(err)
	}
	return s3Object{o, st.Size}, nil
}

func (s *s3Lake) list(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	for o := range s.cl.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.key(prefix), Recursive: true}) {
		if o.Err != nil {
			return nil, notExist(o.Err)
		}
		keys = append(keys, o.Key[len(s.prefix):])
	}
	return keys, nil
}

func (s *s3Lake) remove(ctx context.Context, key string) error {
	err := s.cl.RemoveObject(ctx, s.bucket, s.key(key), minio.RemoveObjectOptions{})
	if err != nil && !errors.Is(notExist(err), fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *s3Lake) stage() (string, func(), error) {
	return stageIn(os.TempDir(), "patrdb-lake", "patrdb-lake-")
}

// The lease of a run in a bucket is an object, _patrdb/runs/<name>.lease,
// created only if absent and renewed only if unchanged (conditional
// writes: If-None-Match, If-Match), naming its holder and when it expires.
// A holder that dies stops renewing: its lease is taken over once expired,
// or at once by a process on the same host that sees the holder's process
// gone.

// leaseTTL is how long a lease lasts without renewal.
const leaseTTL = 30 * time.Second

type leaseBody struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Expires int64  `json:"expires"` // Unix ns
}

type s3Lease struct {
	s        *s3Lake
	key      string
	mu       sync.Mutex
	etag     string
	stop     chan struct{}
	lostc    chan struct{}
	stopOnce sync.Once
}

func (s *s3Lake) lock(ctx context.Context, name string) (lease, error) {
	key := s.key(leaseKey(name))
	host, _ := os.Hostname()
	body := func() []byte {
		b, _ := json.Marshal(leaseBody{Host: host, PID: os.Getpid(), Expires: time.Now().Add(leaseTTL).UnixNano()})
		return b
	}
	put := func(match string) (string, error) {
		opts := minio.PutObjectOptions{ContentType: "application/json"}
		if match == "" {
			opts.SetMatchETagExcept("*")
		} else {
			opts.SetMatchETag(match)
		}
		b := body()
		info, err := s.cl.PutObject(ctx, s.bucket, key, bytes.NewReader(b), int64(len(b)), opts)
		return info.ETag, err
	}
	etag, err := put("")
	if err != nil {
		if !preconditionFailed(err) {
			return nil, fmt.Errorf("taking the lease %s: %w", key, err)
		}
		// Held: take it over if its holder is gone.
		st, serr := s.cl.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{})
		if serr != nil {
			return nil, fmt.Errorf("taking the lease %s: %w", key, serr)
		}
		b, gerr := s.get(ctx, leaseKey(name))
		var held leaseBody
		if gerr != nil || json.Unmarshal(b, &held) != nil {
			return nil, &BusyError{Run: name}
		}
		gone := time.Now().UnixNano() > held.Expires || (held.Host == host && !processAlive(held.PID))
		if !gone {
			return nil, &BusyError{Run: name, Holder: fmt.Sprintf("pid %d on %s", held.PID, held.Host)}
		}
		if etag, err = put(st.ETag); err != nil {
			if preconditionFailed(err) {
				return nil, &BusyError{Run: name}
			}
			return nil, fmt.Errorf("taking the lease %s: %w", key, err)
		}
	}
	l := &s3Lease{s: s, key: key, etag: etag, stop: make(chan struct{}), lostc: make(chan struct{})}
	go l.renew(body)
	return l, nil
}

// renew rewrites the lease every third of its life while it is held.
func (l *s3Lease) renew(body func() []byte) {
	t := time.NewTicker(leaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), leaseTTL/3)
		l.mu.Lock()
		opts := minio.PutObjectOptions{ContentType: "application/json"}
		opts.SetMatchETag(l.etag)
		b := body()
		info, err := l.s.cl.PutObject(ctx, l.s.bucket, l.key, bytes.NewReader(b), int64(len(b)), opts)
		if err == nil {
			l.etag = info.ETag
		}
		l.mu.Unlock()
		cancel()
		if err != nil && preconditionFailed(err) {
			close(l.lostc)
			return
		}
	}
}

func (l *s3Lease) lost() <-chan struct{} { return l.lostc }

func (l *s3Lease) release() {
	l.stopOnce.Do(func() {
		close(l.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l.mu.Lock()
		defer l.mu.Unlock()
		_ = l.s.cl.RemoveObject(ctx, l.s.bucket, l.key, minio.RemoveObjectOptions{})
	})
}

func preconditionFailed(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed" ||
		r.StatusCode == http.StatusConflict
}

// processAlive reports whether a process of that id runs on this host.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}

// leaseKey is where a run's exporter lease lives.
func leaseKey(name string) string { return path.Join(metaDir, "runs", name+".lock") }
