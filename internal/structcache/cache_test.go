package structcache

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"testing"
)

// TestStructCacheHeap fills a Cache with many more distinct composed
// Objects than it may hold, shaped like the function's own (the desired
// resources of a 16-backend ModelRoute, each made distinct by a label), and
// checks, after a collection, that the heap it holds stays within its limit
// and that heapBytes, which the limit is kept by, estimates that heap
// within a quarter.
func TestStructCacheHeap(t *testing.T) {
	objs := slices.Collect(maps.Values(modelRoute16(t)))
	const limit = 8 << 20
	c := New()
	c.limit = limit

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	resets := 0
	for i := 0; resets < 3; i++ {
		o := objs[i%len(objs)]
		md := o["metadata"].(obj)
		labels, _ := md["labels"].(obj)
		if labels == nil {
			labels = obj{}
			md["labels"] = labels
		}
		labels["test.modelplane.ai/i"] = fmt.Sprint(i)
		n := len(c.m)
		if _, err := c.ToStruct(o); err != nil {
			t.Fatal(err)
		}
		if len(c.m) <= n {
			resets++
		}
	}
	// Measure the cache near full: fill it up to the next reset.
	for i := 0; ; i++ {
		o := objs[i%len(objs)]
		o["metadata"].(obj)["labels"].(obj)["test.modelplane.ai/i"] = fmt.Sprint("fill-", i)
		if c.heap > limit*9/10 {
			break
		}
		if _, err := c.ToStruct(o); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int(after.HeapAlloc) - int(before.HeapAlloc)
	estimated := c.heap
	runtime.KeepAlive(c)
	t.Logf("%d entries: %d bytes held, %d estimated, limit %d", len(c.m), held, estimated, limit)
	if held > limit {
		t.Errorf("the cache holds %d bytes of heap, over its limit of %d", held, limit)
	}
	if d := float64(estimated-held) / float64(held); d > 0.25 || d < -0.25 {
		t.Errorf("heapBytes estimates %d bytes, %.0f%% off the %d the cache holds", estimated, 100*d, held)
	}
}

// BenchmarkHeapBytes measures what a cache miss adds to building a Struct
// (BenchmarkToStruct/jsontext, on the same Object): estimating its heap.
func BenchmarkHeapBytes(b *testing.B) {
	o, err := toStruct(aiGatewayRoute(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		heapBytes(1000, o)
	}
}
