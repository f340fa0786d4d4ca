package deepseekv4

import (
	"reflect"
	"testing"
)

// Appendix A of the spec.
var appendixA = []EngramLayerConsts{
	{
		Layer: 1, Slot: 0,
		Primes: [][]int64{
			{16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183},
			{16000189, 16000207, 16000211, 16000253, 16000277, 16000289, 16000307, 16000321},
			{16000339, 16000381, 16000393, 16000399, 16000403, 16000409, 16000447, 16000463},
		},
		Offsets: []int64{0, 16000057, 32000136, 48000217, 64000314, 80000435, 96000564, 112000697, 128000880, 144001069,
			160001276, 176001487, 192001740, 208002017, 224002306, 240002613, 256002934, 272003273, 288003654, 304004047,
			320004446, 336004849, 352005258, 368005705},
		Multipliers: []int64{76632096046245, 4839876093313, 35959672319349, 73987337458391},
		Rows:        384006168,
	},
	{
		Layer: 14, Slot: 1,
		Primes: [][]int64{
			{16000477, 16000487, 16000499, 16000507, 16000511, 16000573, 16000609, 16000627},
			{16000667, 16000669, 16000693, 16000697, 16000711, 16000729, 16000759, 16000769},
			{16000781, 16000799, 16000813, 16000819, 16000841, 16000877, 16000879, 16000889},
		},
		Offsets: []int64{0, 16000477, 32000964, 48001463, 64001970, 80002481, 96003054, 112003663, 128004290, 144004957,
			160005626, 176006319, 192007016, 208007727, 224008456, 240009215, 256009984, 272010765, 288011564, 304012377,
			320013196, 336014037, 352014914, 368015793},
		Multipliers: []int64{67716810739261, 51510806800915, 30921347202721, 82619226485591},
		Rows:        384016682,
	},
}

func TestEngramLayoutAppendixA(t *testing.T) {
	c := loadRelease(t)
	if b := EngramMultiplierBound(c.EngramCompressedVocabSize); b != 46539438283891 {
		t.Errorf("bound %d", b)
	}
	got, err := EngramLayout(c)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, appendixA) {
		t.Fatalf("got %+v\nwant %+v", got, appendixA)
	}
}

func flatPrimes(el []EngramLayerConsts) []int64 {
	var out []int64
	for _, l := range el {
		for _, r := range l.Primes {
			out = append(out, r...)
		}
	}
	return out
}

func TestEngramLayoutReleaseOps(t *testing.T) {
	c := loadRelease(t)
	got, err := EngramLayout(c)
	if err != nil {
		t.Fatal(err)
	}
	f := openGolden(t, "ops.safetensors")
	primes, shape := goldenInt64s(t, f, "release_engram.primes")
	if !reflect.DeepEqual(shape, []int{2, 3, 8}) || !reflect.DeepEqual(flatPrimes(got), primes) {
		t.Errorf("release_engram.primes %v: got %v, want %v", shape, flatPrimes(got), primes)
	}
	mult, _ := goldenInt64s(t, f, "release_engram.multipliers")
	if g := append(append([]int64{}, got[0].Multipliers...), got[1].Multipliers...); !reflect.DeepEqual(g, mult) {
		t.Errorf("release_engram.multipliers: got %v, want %v", g, mult)
	}
}

func TestEngramLayoutTinyGolden(t *testing.T) {
	c := loadTiny(t)
	got, err := EngramLayout(c)
	if err != nil {
		t.Fatal(err)
	}
	f := openGolden(t, "golden.safetensors")
	primes, _ := goldenInt64s(t, f, "engram.primes")
	if !reflect.DeepEqual(flatPrimes(got), primes) {
		t.Errorf("engram.primes: got %v, want %v", flatPrimes(got), primes)
	}
	var offs, mults []int64
	for _, l := range got {
		offs = append(offs, l.Offsets...)
		mults = append(mults, l.Multipliers...)
	}
	wantOffs, _ := goldenInt64s(t, f, "engram.offsets")
	if !reflect.DeepEqual(offs, wantOffs) {
		t.Errorf("engram.offsets: got %v, want %v", offs, wantOffs)
	}
	wantMults, shape := goldenInt64s(t, f, "engram.multipliers")
	if !reflect.DeepEqual(shape, []int{2, 3}) || !reflect.DeepEqual(mults, wantMults) {
		t.Errorf("engram.multipliers %v: got %v, want %v", shape, mults, wantMults)
	}
	for i, l := range got {
		if l.Rows != c.EngramNumEmbeddings[i] {
			t.Errorf("layer %d rows %d, config %d", l.Layer, l.Rows, c.EngramNumEmbeddings[i])
		}
	}
}

func TestEngramLayoutErrors(t *testing.T) {
	c := loadTiny(t)
	c.EngramNHeads = 0
	if _, err := EngramLayout(c); err == nil {
		t.Error("want error for engram_n_heads 0")
	}
	c = loadTiny(t)
	c.EngramLayerIDs, c.EngramNumEmbeddings = nil, nil
	if el, err := EngramLayout(c); err != nil || el != nil {
		t.Errorf("no engram layers: %v %v", el, err)
	}
}
