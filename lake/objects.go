package lake

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"strings"
)

// objects is where a lake's files live: a local folder or a prefix of an
// S3 bucket. Keys are relative to the lake's root, with forward slashes.
// Every object appears whole or not at all: put renames a finished file
// into place, or uploads it (a multipart upload is visible only once
// complete).
type objects interface {
	// put publishes the finished local file under key, replacing an
	// object of that name, and consumes the file.
	put(ctx context.Context, key, file string) error
	// putBytes publishes b under key.
	putBytes(ctx context.Context, key string, b []byte) error
	// get reads a small object; a missing one is fs.ErrNotExist.
	get(ctx context.Context, key string) ([]byte, error)
	// open opens an object for random reads (Parquet's footer first).
	open(ctx context.Context, key string) (object, error)
	// list returns the keys under prefix, in key order.
	list(ctx context.Context, prefix string) ([]string, error)
	// remove deletes an object; a missing one is not an error.
	remove(ctx context.Context, key string) error
	// lock takes the exporter's lease of one run name: ErrBusy (a
	// *BusyError) when another process holds it. release gives it back;
	// lost, when not nil, is closed if the lease is lost meanwhile.
	lock(ctx context.Context, name string) (l lease, err error)
	// stage makes a private local folder to write files into before they
	// are published, removing what killed exports left; release removes it.
	stage() (dir string, release func(), err error)
	// String is the lake's URL.
	String() string
}

// object is an open lake object.
type object interface {
	io.ReaderAt
	io.Closer
	size() int64
}

// lease is an exporter's hold on a run name in a lake.
type lease interface {
	release()
	// lost is closed when the lease was lost (another process took it);
	// nil when it cannot be.
	lost() <-chan struct{}
}

// Lake is an open lake: a local folder or an S3-compatible bucket.
type Lake struct {
	obj objects
}

// Options configure Open. nil means defaults.
type Options struct {
	// Getenv reads the environment (for s3:// lakes: the endpoint,
	// region and credentials, as the AWS tools read them); nil: os.Getenv.
	Getenv func(string) string
}

// Open opens the lake at u: a folder path (or file:// URL), created on the
// first export, or s3://bucket[/prefix], whose endpoint, region and
// credentials come from the usual environment variables:
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (default: AWS itself),
// AWS_REGION or AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, else the shared credentials
// file (AWS_PROFILE), else the machine's instance role (unless
// AWS_EC2_METADATA_DISABLED=true).
func Open(u string, opts *Options) (*Lake, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case u == "":
		return nil, fmt.Errorf("%w: empty", ErrURL)
	case strings.HasPrefix(u, "s3://"):
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			return nil, fmt.Errorf("%w: %s: want s3://bucket[/prefix]", ErrURL, u)
		}
		obj, err := openS3(p.Host, strings.Trim(p.Path, "/"), o.Getenv)
		if err != nil {
			return nil, err
		}
		return &Lake{obj: obj}, nil
	case strings.HasPrefix(u, "file://"):
		p, err := url.Parse(u)
		if err != nil || (p.Host != "" && p.Host != "localhost") {
			return nil, fmt.Errorf("%w: %s: want file:///path", ErrURL, u)
		}
		return &Lake{obj: &localLake{root: filepath.Clean(p.Path)}}, nil
	case strings.Contains(u, "://"):
		return nil, fmt.Errorf("%w: %s: want a folder or s3://bucket[/prefix]", ErrURL, u)
	}
	return &Lake{obj: &localLake{root: filepath.Clean(u)}}, nil
}

// String is the lake's URL (a folder's path).
func (l *Lake) String() string { return l.obj.String() }

// Remote reports whether the lake is in object storage, not a folder.
func (l *Lake) Remote() bool {
	_, local := l.obj.(*localLake)
	return !local
}
