package structcache

import (
	"unsafe"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/structpb"
)

// Heap sizes of the messages a Struct is made of (protobuf-go's generated
// structs, google.golang.org/protobuf/types/known/structpb), and of one map
// slot of a Struct's fields: a string header and a pointer.
var (
	sizeStruct    = int(unsafe.Sizeof(structpb.Struct{}))
	sizeValue     = int(unsafe.Sizeof(structpb.Value{}))
	sizeListValue = int(unsafe.Sizeof(structpb.ListValue{}))
	sizeMapSlot   = int(unsafe.Sizeof("")) + int(unsafe.Sizeof(uintptr(0)))
)

// heapBytes estimates the heap one cache entry holds: its key of keyLen
// bytes and every message, map, list and string of s, each allocation
// rounded up as Go's allocator rounds it (allocSize). Go's maps keep
// groups of eight slots and a control word, at most seven eighths full
// (Go 1.24's Swiss tables, internal/runtime/maps), with a header of their
// own.
func heapBytes(keyLen int, s *structpb.Struct) int {
	return allocSize(keyLen) + allocSize(sizeMapSlot) + structHeapBytes(s)
}

func structHeapBytes(s *structpb.Struct) int {
	n := allocSize(sizeStruct) + mapHeapBytes(len(s.GetFields()))
	for k, v := range s.GetFields() {
		n += allocSize(len(k)) + valueHeapBytes(v)
	}
	return n
}

func valueHeapBytes(v *structpb.Value) int {
	n := allocSize(sizeValue)
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		n += allocSize(int(unsafe.Sizeof(*k))) + allocSize(len(k.StringValue))
	case *structpb.Value_StructValue:
		n += allocSize(int(unsafe.Sizeof(*k))) + structHeapBytes(k.StructValue)
	case *structpb.Value_ListValue:
		l := k.ListValue.GetValues()
		n += allocSize(int(unsafe.Sizeof(*k))) + allocSize(sizeListValue) + allocSize(cap(l)*int(unsafe.Sizeof(v)))
		for _, e := range l {
			n += valueHeapBytes(e)
		}
	default:
		// A number, a bool or a null: one word in its oneof wrapper.
		n += allocSize(8)
	}
	return n
}

// mapHeapBytes estimates a map[string]*structpb.Value of n entries.
func mapHeapBytes(n int) int {
	const header, group = 48, 8
	groupBytes := 8 + group*sizeMapSlot
	if n == 0 {
		return allocSize(header)
	}
	if n <= group {
		return allocSize(header) + allocSize(groupBytes)
	}
	groups := 1
	for groups*group*7/8 < n {
		groups *= 2
	}
	return allocSize(header) + allocSize(groups*groupBytes) + allocSize(64)
}

// wireHeapBytes estimates the heap a cached encoding holds: its bytes, and
// its slot in the cache's wire map (a pointer and a slice header), with
// the map's slack (mapHeapBytes: groups at most seven eighths full).
func wireHeapBytes(w protoreflect.RawFields) int {
	slot := int(unsafe.Sizeof(uintptr(0))) + int(unsafe.Sizeof(w))
	return allocSize(len(w)) + slot*8/7
}

// allocSize rounds n up roughly as Go's size classes do
// (runtime/sizeclasses.go): to 8 bytes up to 16, to 16 up to 256, then to a
// sixteenth of the power of two at or above it.
func allocSize(n int) int {
	switch {
	case n <= 0:
		return 0
	case n <= 16:
		return (n + 7) &^ 7
	case n <= 256:
		return (n + 15) &^ 15
	}
	p := 512
	for p < n {
		p *= 2
	}
	q := p / 16
	return (n + q - 1) / q * q
}
