package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// Everything goes through client-go's dynamic client. Its typed clientset
// and its informers (tools/cache) would each pull a module into the
// function's go.mod that nothing else needs (gopkg.in/evanphx/json-patch.v4
// and github.com/pmezard/go-difflib), so built-in kinds are converted to
// and from their k8s.io/api types here, and watcher below does the little
// an informer would.

var (
	// GVRPod is the Pods' resource.
	GVRPod            = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrServiceAccount = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	gvrService        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

// toUnstructured converts a typed object, giving it apiVersion and kind.
func toUnstructured(obj any, apiVersion, kind string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("cannot convert a %s to unstructured: %w", kind, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	return u, nil
}

// FromUnstructured converts into a typed object.
func FromUnstructured(u *unstructured.Unstructured, out any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return fmt.Errorf("cannot convert %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// watcher keeps the objects of one resource from a list and a watch, and
// calls onChange for every add or update and onDelete for every deletion.
// When the watch ends it lists again; an object that went in the gap is
// reported as deleted then, like an informer's DeletedFinalStateUnknown.
type watcher struct {
	c        *Cluster
	gvr      schema.GroupVersionResource
	onChange func(*unstructured.Unstructured)
	onDelete func(*unstructured.Unstructured)

	once   sync.Once
	synced chan struct{}

	mu    sync.Mutex
	items map[string]*unstructured.Unstructured
}

func newWatcher(c *Cluster, gvr schema.GroupVersionResource, onChange, onDelete func(*unstructured.Unstructured)) *watcher {
	return &watcher{c: c, gvr: gvr, onChange: onChange, onDelete: onDelete, synced: make(chan struct{}), items: map[string]*unstructured.Unstructured{}}
}

// Key is u's namespace/name.
func Key(u *unstructured.Unstructured) string { return u.GetNamespace() + "/" + u.GetName() }

// list returns the objects as last seen.
func (w *watcher) list() []*unstructured.Unstructured {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*unstructured.Unstructured, 0, len(w.items))
	for _, u := range w.items {
		out = append(out, u)
	}
	return out
}

// run lists and watches until ctx ends. Handlers run on this goroutine,
// one event at a time, in the order the API server sent them.
func (w *watcher) run(ctx context.Context) {
	for ctx.Err() == nil {
		rv, err := w.relist(ctx)
		if err != nil {
			Sleep(ctx, time.Second)
			continue
		}
		w.once.Do(func() { close(w.synced) })
		wi, err := w.c.Dyn.Resource(w.gvr).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			Sleep(ctx, time.Second)
			continue
		}
		w.consume(wi)
	}
}

// relist replaces the objects with a fresh list and reports the
// differences, returning the list's resourceVersion to watch from.
func (w *watcher) relist(ctx context.Context) (string, error) {
	l, err := w.c.Dyn.Resource(w.gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	fresh := make(map[string]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		fresh[Key(&l.Items[i])] = &l.Items[i]
	}
	w.mu.Lock()
	var gone, changed []*unstructured.Unstructured
	for k, u := range w.items {
		if _, ok := fresh[k]; !ok {
			gone = append(gone, u)
		}
	}
	for k, u := range fresh {
		if old, ok := w.items[k]; !ok || old.GetResourceVersion() != u.GetResourceVersion() {
			changed = append(changed, u)
		}
	}
	w.items = fresh
	w.mu.Unlock()
	for _, u := range gone {
		w.onDelete(u)
	}
	for _, u := range changed {
		w.onChange(u)
	}
	return l.GetResourceVersion(), nil
}

// consume handles watch events until the watch ends or fails.
func (w *watcher) consume(wi watch.Interface) {
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		switch {
		case ev.Type == watch.Error:
			// Usually 410 Gone: the resourceVersion is too old. List again.
			return
		case !ok || ev.Type == watch.Bookmark:
			continue
		case ev.Type == watch.Deleted:
			w.mu.Lock()
			delete(w.items, Key(u))
			w.mu.Unlock()
			w.onDelete(u)
		default:
			w.mu.Lock()
			w.items[Key(u)] = u
			w.mu.Unlock()
			w.onChange(u)
		}
	}
}

// Sleep waits d, or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
