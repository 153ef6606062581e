// Host driver for tests/test_amd_layout.py: runs the index functions of escha/wmma_layout.h and
// the vendor-neutral decoders of escha/wmma_decode.h (the code the gfx12 fused kernel runs per
// lane) on the CPU, lane by lane, and prints the results as JSON.
//
//   amd_layout_host layout                 -> every index function, every lane and element
//   amd_layout_host decode K2 CB < words   -> one tile (W32 hex u32 words on stdin), per lane:
//                                             "direct": the 8 fp16 bit patterns of the WMMA route,
//                                             "nv": the 8 of the NVIDIA-order decode (decode_lane),
//                                             "shuffle": the re-layout of "nv" (relayout_send /
//                                             exchange / relayout_recv), per VGPR r two halves
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "escha/platform.h"
#include "escha/wmma_decode.h"

using namespace escha;

static void print_list(const char* name, int (*f)(int, int), int lane, bool comma = true) {
    std::printf("\"%s\": [", name);
    for (int e = 0; e < 8; ++e) std::printf("%d%s", f(lane, e), e < 7 ? ", " : "");
    std::printf("]%s", comma ? ", " : "");
}

static int layout() {
    std::printf("{\"lanes\": [\n");
    for (int l = 0; l < 32; ++l) {
        std::printf("{\"lane\": %d, \"a_row\": %d, ", l, wmma::a_row(l));
        print_list("a_k", wmma::a_k, l);
        print_list("b_k", wmma::b_k, l);
        print_list("b_n", wmma::b_n, l);
        print_list("b_pos", wmma::b_pos, l);
        print_list("acc_row", wmma::acc_row, l);
        print_list("acc_col", wmma::acc_col, l);
        std::printf("\"xchg_src_lane\": [%d, %d, %d, %d], ", wmma::xchg_src_lane(l, 0), wmma::xchg_src_lane(l, 1),
                    wmma::xchg_src_lane(l, 2), wmma::xchg_src_lane(l, 3));
        std::printf("\"xchg_send_pair\": [%d, %d, %d, %d], ", wmma::xchg_send_pair(l, 0), wmma::xchg_send_pair(l, 1),
                    wmma::xchg_send_pair(l, 2), wmma::xchg_send_pair(l, 3));
        std::printf("\"xchg_dst_reg\": [%d, %d, %d, %d]}%s\n", wmma::xchg_dst_reg(l, 0), wmma::xchg_dst_reg(l, 1),
                    wmma::xchg_dst_reg(l, 2), wmma::xchg_dst_reg(l, 3), l < 31 ? "," : "");
    }
    std::printf("], \"fmt\": [");
    for (int p = 0; p < 256; ++p) std::printf("[%d, %d]%s", wmma::fmt_row(p), wmma::fmt_col(p), p < 255 ? ", " : "");
    std::printf("]}\n");
    return 0;
}

static u16 bits(half_t h) { u16 b; std::memcpy(&b, &h, 2); return b; }

template <int K2, int CB>
static int decode_tile(const u32* tile) {
    u32 mask = 0x8FFF8FFFu;
    u32 nv_pairs[32][4];
    std::printf("{\"NW\": %d, \"NA\": %d, \"SPAN\": %d, \"lanes\": [\n", wmma::WmmaStream<K2>::NW,
                wmma::WmmaStream<K2>::NA, wmma::WmmaStream<K2>::SPAN);
    for (int l = 0; l < 32; ++l) {
        const wmma::WmmaStream<K2> st(l);
        u32 w[wmma::WmmaStream<K2>::NW];
        for (int q = 0; q < wmma::WmmaStream<K2>::NW; ++q) w[q] = tile[st.word[q]];
        half2_t h[4];
        st.template decode<CB>(w, h, mask);
        const LaneStream<K2> ls(l);
        u32 wn[LaneStream<K2>::NW];
        for (int q = 0; q < LaneStream<K2>::NW; ++q) wn[q] = tile[ls.word[q]];
        half2_t hn[4];
        decode_lane<K2, CB>(wn, ls, hn, mask);
        for (int q = 0; q < 4; ++q) nv_pairs[l][q] = bit_cast<u32>(hn[q]);
        // the same states cut with one-word shifts as multiplies (LaneStream::states<true>, the LCG
        // codebooks' swapped route on NVIDIA)
        u32 sm[8];
        ls.template states<true>(wn, sm);
        half2_t hm[4];
        for (int q = 0; q < 4; ++q) hm[q] = decode2<CB>(sm[2 * q], sm[2 * q + 1], mask);
        std::printf("{\"lane\": %d, \"rsh\": %u, \"words\": [", l, st.rsh);
        for (int q = 0; q < wmma::WmmaStream<K2>::NW; ++q) std::printf("%d%s", st.word[q], q + 1 < wmma::WmmaStream<K2>::NW ? ", " : "");
        std::printf("], \"direct\": [");
        for (int r = 0; r < 4; ++r) std::printf("%u, %u%s", bits(h[r].x), bits(h[r].y), r < 3 ? ", " : "");
        std::printf("], \"nv\": [");
        for (int q = 0; q < 4; ++q) std::printf("%u, %u%s", bits(hn[q].x), bits(hn[q].y), q < 3 ? ", " : "");
        std::printf("], \"nv_mul\": [");
        for (int q = 0; q < 4; ++q) std::printf("%u, %u%s", bits(hm[q].x), bits(hm[q].y), q < 3 ? ", " : "");
        std::printf("]}%s\n", l < 31 ? "," : "");
    }
    // the shuffle route, all lanes in lock step: send -> 4 exchange rounds -> receive
    u32 send[32][4], out[32][4];
    for (int l = 0; l < 32; ++l) wmma::relayout_send(nv_pairs[l], send[l], l);
    for (int l = 0; l < 32; ++l)
        for (int t = 0; t < 4; ++t) out[l][t] = send[wmma::xchg_src_lane(l, t)][t];
    for (int l = 0; l < 32; ++l) wmma::relayout_recv(out[l], l);
    std::printf("], \"shuffle\": [");
    for (int l = 0; l < 32; ++l) {
        std::printf("[");
        for (int r = 0; r < 4; ++r) std::printf("%u, %u%s", out[l][r] & 0xFFFFu, out[l][r] >> 16, r < 3 ? ", " : "");
        std::printf("]%s", l < 31 ? ", " : "");
    }
    std::printf("]}\n");
    return 0;
}

template <int K2>
static int decode_cb(int cb, const u32* tile) {
    switch (cb) {
        case 0: return decode_tile<K2, CB_3INST>(tile);
        case 1: return decode_tile<K2, CB_MCG>(tile);
        case 2: return decode_tile<K2, CB_MUL1>(tile);
    }
    return 2;
}

static int decode(int K2, int cb) {
    u32 tile[64];
    const int n = 4 * K2;
    for (int i = 0; i < n; ++i)
        if (std::scanf("%x", &tile[i]) != 1) { std::fprintf(stderr, "need %d hex words\n", n); return 2; }
    switch (K2) {
        case 2: return decode_cb<2>(cb, tile);   case 3: return decode_cb<3>(cb, tile);
        case 4: return decode_cb<4>(cb, tile);   case 5: return decode_cb<5>(cb, tile);
        case 6: return decode_cb<6>(cb, tile);   case 7: return decode_cb<7>(cb, tile);
        case 8: return decode_cb<8>(cb, tile);   case 10: return decode_cb<10>(cb, tile);
        case 12: return decode_cb<12>(cb, tile); case 14: return decode_cb<14>(cb, tile);
        case 16: return decode_cb<16>(cb, tile);
    }
    std::fprintf(stderr, "K2=%d is not a rate\n", K2);
    return 2;
}

int main(int argc, char** argv) {
    if (argc >= 2 && !std::strcmp(argv[1], "layout")) return layout();
    if (argc >= 4 && !std::strcmp(argv[1], "decode")) return decode(std::atoi(argv[2]), std::atoi(argv[3]));
    std::fprintf(stderr, "usage: %s layout | decode K2 CB < words\n", argv[0]);
    return 2;
}
