// Host check of escha::DivMod (include/escha/platform.h): for every divisor 1..16384 it compares
// q, r with integer division on every n < 2^16 and on n = q * d - 1, q * d, q * d + 1 up to 2^22
// (where a reciprocal's rounding would first show). Prints the number of mismatches and the
// first few; tests/test_divmod.py runs it.
#include <cstdio>
#include "escha/platform.h"

using namespace escha;

int main() {
    long long bad = 0, checked = 0;
    auto check = [&](const DivMod& dm, int n) {
        int q, r;
        dm(n, q, r);
        ++checked;
        if (q != n / dm.d || r != n % dm.d) {
            if (bad < 5) std::printf("d=%d n=%d: q=%d r=%d\n", dm.d, n, q, r);
            ++bad;
        }
    };
    constexpr int LIMIT = 1 << 22;
    for (int d = 1; d <= 16384; ++d) {
        const DivMod dm(d);
        for (int n = 0; n < (1 << 16); ++n) check(dm, n);
        for (long long m = (long long)d; m - 1 < LIMIT; m += d) {
            check(dm, (int)(m - 1));
            if (m < LIMIT) check(dm, (int)m);
            if (m + 1 < LIMIT) check(dm, (int)(m + 1));
        }
        check(dm, LIMIT - 1);
    }
    std::printf("checked %lld mismatches %lld\n", checked, bad);
    return bad != 0;
}
