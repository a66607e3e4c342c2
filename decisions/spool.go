package decisions

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/gofrs/flock"
	"google.golang.org/protobuf/encoding/protojson"

	yesguardv1 "github.com/yesguard/yesguard/proto/yesguard/v1"
)

// The spool: the records queued for the stream, on disk (finding 14 of the
// red team: records queued during an outage died with the replica).
//
// Rules that hold:
//   - A record is appended to the spool file, and synced, before Add
//     reports it queued; so a Check answered during an outage has its
//     record on disk, and a kill -9 loses none.
//   - The file is emptied only when no record is left queued: every
//     record in it is stored on the stream, or still queued.
//   - Each process holds one spool slot (a file and its flock) in the
//     directory; a replica that opens the directory takes over what the
//     slots no one holds (a replica that died) left, and stores it. The
//     stream's duplicate window, and List's de-duplication by decision id,
//     keep a record stored twice (stored, then the spool not yet emptied
//     at a crash) listed once.

// spoolSlots bounds the spool files in one directory: the processes that
// may spool there at once.
const spoolSlots = 16

// The spool commits in groups: the records appended while a write and
// sync are under way are written, and synced, together by the next one, so
// a burst of records queued at once (an outage, a stream slower than the
// Checks' deadlines) costs a few syncs, not one each in turn. Each append
// still returns only once its record is synced.
type spool struct {
	mu      sync.Mutex // guards f and pending
	f       *os.File
	lock    *flock.Flock
	pending int // records in f not yet stored

	groupMu sync.Mutex // guards next and writing
	next    *spoolGroup
	writing bool
	syncs   atomic.Int64 // the syncs made (tests)
}

// spoolGroup is records waiting for one write and sync; done is closed
// after it, err set first.
type spoolGroup struct {
	buf  []byte
	n    int
	done chan struct{}
	err  error
}

// OpenSpool makes the queue durable in dir (created if need be): records
// queued from now on are kept there until stored, and the records that a
// process which died left in dir are queued again. It returns how many it
// took over. Call it once, before the first Add.
func (s *Stream) OpenSpool(dir string) (int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, fmt.Errorf("decisions: spool: %w", err)
	}
	sp := &spool{}
	var left []string // slots no one holds
	for slot := range spoolSlots {
		path := filepath.Join(dir, fmt.Sprintf("decisions-%d.spool", slot))
		l := flock.New(path + ".lock")
		ok, err := l.TryLock()
		if err != nil || !ok {
			continue
		}
		if sp.lock == nil {
			f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
			if err != nil {
				_ = l.Unlock()
				return 0, fmt.Errorf("decisions: spool: %w", err)
			}
			sp.f, sp.lock = f, l
			left = append(left, path)
			continue
		}
		left = append(left, path)
		defer func() { _ = l.Unlock() }() // taken over below, then let go
	}
	if sp.lock == nil {
		return 0, fmt.Errorf("decisions: spool: all %d slots of %s are held", spoolSlots, dir)
	}
	// Take over what the free slots (this one included) hold: into this
	// slot's file first, then the queue.
	var taken []*yesguardv1.Decision
	for _, path := range left {
		ds, err := readSpool(path)
		if err != nil {
			return 0, err
		}
		if path != sp.f.Name() && len(ds) > 0 {
			for _, d := range ds {
				if err := sp.append(d); err != nil {
					return 0, err
				}
			}
			if err := os.Truncate(path, 0); err != nil {
				return 0, fmt.Errorf("decisions: spool: %w", err)
			}
		}
		taken = append(taken, ds...)
	}
	sp.mu.Lock()
	sp.pending = len(taken)
	sp.mu.Unlock()
	s.spool = sp
	n := 0
	for _, d := range taken {
		select {
		case s.retry <- d:
			s.queued.Add(1)
			n++
		default:
			s.dropped.Add(1) // still in the file: stored at a later start
		}
	}
	return n, nil
}

// readSpool reads a spool file's records; a line that is not one (a write
// cut short by a crash) is skipped.
func readSpool(path string) ([]*yesguardv1.Decision, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("decisions: spool: %w", err)
	}
	var out []*yesguardv1.Decision
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		d := new(yesguardv1.Decision)
		if protojson.Unmarshal(sc.Bytes(), d) == nil && d.GetDecisionId() != "" {
			out = append(out, d)
		}
	}
	return out, nil
}

// append writes d to the spool file and syncs it, with the records
// appended at the same time.
func (sp *spool) append(d *yesguardv1.Decision) error {
	line, err := recordJSON.Marshal(d)
	if err != nil {
		return err
	}
	sp.groupMu.Lock()
	g := sp.next
	if g == nil {
		g = &spoolGroup{done: make(chan struct{})}
		sp.next = g
	}
	g.buf = append(append(g.buf, line...), '\n')
	g.n++
	if !sp.writing {
		sp.writing = true
		go sp.commit()
	}
	sp.groupMu.Unlock()
	<-g.done
	return g.err
}

// commit writes and syncs the waiting groups, one after the other, until
// none is left.
func (sp *spool) commit() {
	for {
		sp.groupMu.Lock()
		g := sp.next
		sp.next = nil
		if g == nil {
			sp.writing = false
			sp.groupMu.Unlock()
			return
		}
		sp.groupMu.Unlock()
		sp.mu.Lock()
		_, err := sp.f.Write(g.buf)
		if err == nil {
			err = sp.f.Sync()
			sp.syncs.Add(1)
		}
		if err == nil {
			sp.pending += g.n
		}
		sp.mu.Unlock()
		if err != nil {
			g.err = fmt.Errorf("decisions: spool: %w", err)
		}
		close(g.done)
	}
}

// stored counts one spooled record stored; the last empties the file.
func (sp *spool) stored() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.pending > 0 {
		sp.pending--
	}
	if sp.pending == 0 {
		_ = sp.f.Truncate(0)
	}
}

// close lets the slot go; records not stored stay in the file.
func (sp *spool) close() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	_ = sp.f.Close()
	_ = sp.lock.Unlock()
}
