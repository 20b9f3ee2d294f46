package v1alpha1

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// filler sets every field it reaches, at any depth — strings, numbers,
// bools, times, pointers, slices and maps (two entries each) — to a value
// no other field has, so that a field added to a type is filled without a
// change here. Two fillers fill two equal objects.
type filler struct {
	t *testing.T
	n int
}

var epoch = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

func (f *filler) fill(v reflect.Value, path string) {
	f.n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("v%d", f.n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.n))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(f.n))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(f.n))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), path)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.fill(s.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k, path+"[key]")
			f.fill(e, path+"[value]")
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(epoch.Add(time.Duration(f.n) * time.Second)))
			return
		}
		for i := range v.NumField() {
			field := v.Type().Field(i)
			if !field.IsExported() {
				f.t.Fatalf("%s.%s is unexported: the filler cannot reach it", path, field.Name)
			}
			f.fill(v.Field(i), path+"."+field.Name)
		}
	default:
		f.t.Fatalf("%s: a %v, which the filler does not know", path, v.Kind())
	}
}

// mutate changes every value it reaches in place: every string, number,
// bool and time, through every pointer, in every slice element and map
// value, and adds a key to every map. Whatever a copy shares with its
// original changes in the original too.
func mutate(t *testing.T, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "'")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1000)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1000)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(v.Float() + 1000)
	case reflect.Pointer:
		if !v.IsNil() {
			mutate(t, v.Elem(), path)
		}
	case reflect.Slice:
		for i := range v.Len() {
			mutate(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutate(t, e, path+"["+fmt.Sprint(k)+"]")
			v.SetMapIndex(k, e)
		}
		k := reflect.New(v.Type().Key()).Elem()
		(&filler{t: t, n: 1 << 20}).fill(k, path+"[new key]")
		v.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Hour)))
			return
		}
		for i := range v.NumField() {
			mutate(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: a %v, which mutate does not know", path, v.Kind())
	}
}

// TestDeepCopy_SharesNothing fills every field of each object — maps,
// slices, pointers, NodeSelector, the status, whatever is added later —
// with distinct values, copies it, checks the copy is equal, then changes
// every value of the copy and checks the original did not move: a field a
// DeepCopyInto forgets to copy, or copies shallowly, fails here.
func TestDeepCopy_SharesNothing(t *testing.T) {
	for _, tt := range []struct {
		name string
		new  func() Object
		copy func(Object) Object
	}{
		{"Member", func() Object { return new(Member) }, func(o Object) Object { return o.(*Member).DeepCopy() }},
		{"Member via DeepCopyObject", func() Object { return new(Member) }, func(o Object) Object { return o.(*Member).DeepCopyObject() }},
		{"Profile", func() Object { return new(Profile) }, func(o Object) Object { return o.(*Profile).DeepCopy() }},
		{"Profile via DeepCopyObject", func() Object { return new(Profile) }, func(o Object) Object { return o.(*Profile).DeepCopyObject() }},
		{"Tenant", func() Object { return new(Tenant) }, func(o Object) Object { return o.(*Tenant).DeepCopy() }},
		{"Tenant via DeepCopyObject", func() Object { return new(Tenant) }, func(o Object) Object { return o.(*Tenant).DeepCopyObject() }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if empty := tt.new(); !reflect.DeepEqual(empty, tt.copy(empty)) {
				t.Errorf("the copy of an empty object differs (nil turned into empty?): %+v", tt.copy(empty))
			}
			full := func() Object {
				o := tt.new()
				(&filler{t: t}).fill(reflect.ValueOf(o).Elem(), tt.name)
				return o
			}
			orig := full()
			cp := tt.copy(orig)
			if diff := cmp.Diff(orig, cp); diff != "" {
				t.Fatalf("copy differs from its original (-orig +copy):\n%s", diff)
			}
			mutate(t, reflect.ValueOf(cp).Elem(), tt.name)
			if cmp.Equal(full(), cp) {
				t.Fatal("mutate changed nothing in the copy")
			}
			if diff := cmp.Diff(full(), orig); diff != "" {
				t.Errorf("the original changed with its copy: they share memory (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("nil", func(t *testing.T) {
		if (*Member)(nil).DeepCopy() != nil || (*Profile)(nil).DeepCopy() != nil || (*Tenant)(nil).DeepCopy() != nil ||
			(*ObjectMeta)(nil).DeepCopy() != nil || (*MCPTarget)(nil).DeepCopy() != nil || (*AgentSession)(nil).DeepCopy() != nil ||
			(*MemberWorktree)(nil).DeepCopy() != nil || (*ProfileWorktree)(nil).DeepCopy() != nil || (*WorktreeStatus)(nil).DeepCopy() != nil {
			t.Errorf("DeepCopy of nil is not nil")
		}
	})
}
