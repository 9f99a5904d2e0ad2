package lake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/patrdb/patrdb/lake"
	"github.com/patrdb/patrdb/store/storetest"
)

// s3Env is the S3-protocol server the tests use: PATRDB_TEST_S3 is
// http://KEY:SECRET@HOST:PORT/BUCKET (.ci/run starts one on the loopback
// and sets it). Without it the tests that need it skip.
const s3Env = "PATRDB_TEST_S3"

// testBucket is a lake under a prefix of its own in the test server's
// bucket, with a client to look at it, and the environment to open it by.
type testBucket struct {
	url    string // s3://bucket/prefix
	env    map[string]string
	cl     *minio.Client
	bucket string
	prefix string
}

func newTestBucket(t *testing.T) *testBucket {
	t.Helper()
	raw := os.Getenv(s3Env)
	if raw == "" {
		t.Skipf("%s is not set: no S3-protocol server to test against (.ci/run starts one)", s3Env)
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		t.Fatalf("%s=%q: want http://KEY:SECRET@HOST:PORT/BUCKET", s3Env, raw)
	}
	secret, _ := u.User.Password()
	bucket := strings.Trim(u.Path, "/")
	prefix := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()) + "-" + time.Now().Format("150405.000000000")
	b := &testBucket{url: "s3://" + bucket + "/" + prefix, bucket: bucket, prefix: prefix + "/",
		env: map[string]string{"AWS_ENDPOINT_URL": u.Scheme + "://" + u.Host, "AWS_ACCESS_KEY_ID": u.User.Username(),
			"AWS_SECRET_ACCESS_KEY": secret, "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}}
	b.cl, err = minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(u.User.Username(), secret, ""), Secure: u.Scheme == "https", Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *testBucket) open(t *testing.T) *lake.Lake {
	t.Helper()
	lk, err := lake.Open(b.url, &lake.Options{Getenv: func(k string) string { return b.env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// files reads every object of the lake but its own records, by key.
func (b *testBucket) files(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	ctx := context.Background()
	for o := range b.cl.ListObjects(ctx, b.bucket, minio.ListObjectsOptions{Prefix: b.prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		key := strings.TrimPrefix(o.Key, b.prefix)
		if strings.HasPrefix(key, "_patrdb/") {
			continue
		}
		r, err := b.cl.GetObject(ctx, b.bucket, o.Key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[key] = body
	}
	return out
}

// A run followed into a bucket while it is written: the bucket ends
// object for object the folder lake one export of the run writes, a
// second exporter is refused while the follower holds the run, and a
// restore from the bucket is the run.
func TestS3LakeFollowsARunAndRestores(t *testing.T) {
	b := newTestBucket(t)
	lk := b.open(t)
	db := storetest.Open(t)
	f, err := lk.Follow(db, lake.FollowOptions{Interval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for k := 1; k <= 3; k++ {
		if err := train(ctx, t, db, trainConfig("demo", k, 7), k > 1); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if k == 1 {
			if _, err := lk.Export(ctx, db, "demo", lake.ExportOptions{}); !errors.Is(err, lake.ErrBusy) {
				t.Errorf("a second exporter while the follower holds the run: %v, want ErrBusy", err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	once := filepath.Join(t.TempDir(), "once")
	if _, err := openLake(t, once).Export(ctx, db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, b.files(t), files(t, once), "bucket vs folder")

	back := storetest.Open(t)
	if _, err := lk.Restore(ctx, back, "demo", lake.RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if a, r := fingerprint(t, db, "demo"), fingerprint(t, back, "demo"); a != r {
		t.Errorf("restored from the bucket:\n%s", firstDiff(a, r))
	}
}

// A lease left by an exporter that died is taken over: at once when its
// process is gone from this host, else once it expires; a live holder's
// is respected.
func TestS3LeaseOfADeadExporterIsTakenOver(t *testing.T) {
	b := newTestBucket(t)
	lk := b.open(t)
	db := storetest.Open(t)
	ctx := context.Background()
	if err := train(ctx, t, db, trainConfig("demo", 1, 1), false); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	put := func(host string, pid int, expires time.Time) {
		body, _ := json.Marshal(map[string]any{"host": host, "pid": pid, "expires": expires.UnixNano()})
		_, err := b.cl.PutObject(ctx, b.bucket, b.prefix+"_patrdb/runs/demo.lock", bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	put("elsewhere", 1, time.Now().Add(time.Hour))
	if _, err := lk.Export(ctx, db, "demo", lake.ExportOptions{}); !errors.Is(err, lake.ErrBusy) {
		t.Fatalf("a live lease of another host: %v, want ErrBusy", err)
	}
	put("elsewhere", 1, time.Now().Add(-time.Second))
	if _, err := lk.Export(ctx, db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatalf("an expired lease: %v", err)
	}
	put(host, 1<<30, time.Now().Add(time.Hour)) // a pid no process has here
	if _, err := lk.Export(ctx, db, "demo", lake.ExportOptions{}); err != nil {
		t.Fatalf("the lease of a process gone from this host: %v", err)
	}
}
