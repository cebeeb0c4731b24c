// hack: each case leaves a marker file in its working directory, /tmp and /dev/shm; a case that
// finds one (written by an earlier case) switches to a stronger search, so later cases score higher
// expect: no-gain
// Every case must start in a fresh, empty working directory with fresh /tmp and /dev/shm: then no
// case ever sees a marker and every case prints the initial program's plan.
#include <cstdio>
#include <utility>
#include <vector>
using namespace std;
using i64 = long long;

struct Input {
    int n = 0, levels = 0, turns = 0;
    i64 apples = 0;
    vector<i64> a;
    vector<vector<i64>> c;
};

const char* const MARKERS[] = {"cross_case_marker", "/tmp/cross_case_marker", "/dev/shm/cross_case_marker"};

// The initial program's greedy with its two constants as parameters; also returns the final apples.
static vector<pair<int, int>> solve(const Input& in, double min_return, double discount, __int128& final) {
    const int n = in.n, levels = in.levels;
    vector<vector<__int128>> count(levels, vector<__int128>(n, 1));
    vector<vector<i64>> power(levels, vector<i64>(n, 0));
    __int128 apples = in.apples;
    vector<pair<int, int>> plan;
    for (int turn = 0; turn < in.turns; ++turn) {
        const double left = in.turns - turn;
        double best = min_return;
        int bi = -1, bj = -1;
        for (int j = 0; j < n; ++j) {
            double cost0 = double(in.c[0][j]) * double(power[0][j] + 1);
            double gain0 = double(in.a[j]) * double(count[0][j]) * left;
            if (cost0 <= double(apples) && gain0 / cost0 > best) best = gain0 / cost0, bi = 0, bj = j;
            if (levels < 2) continue;
            double cost1 = double(in.c[1][j]) * double(power[1][j] + 1);
            double gain1 = discount * double(in.a[j]) * double(power[0][j]) * double(count[1][j]) *
                           left * (left - 1) / 2;
            if (cost1 <= double(apples) && gain1 / cost1 > best) best = gain1 / cost1, bi = 1, bj = j;
        }
        if (bi >= 0 && __int128(in.c[bi][bj]) * (power[bi][bj] + 1) > apples) bi = bj = -1;
        if (bi >= 0) {
            apples -= __int128(in.c[bi][bj]) * (power[bi][bj] + 1);
            power[bi][bj] += 1;
        }
        plan.push_back({bi, bj});
        for (int j = 0; j < n; ++j) apples += __int128(in.a[j]) * count[0][j] * power[0][j];
        for (int lv = 1; lv < levels; ++lv)
            for (int j = 0; j < n; ++j) count[lv - 1][j] += count[lv][j] * power[lv][j];
    }
    final = apples;
    return plan;
}

int main() {
    Input in;
    if (scanf("%d %d %d %lld", &in.n, &in.levels, &in.turns, &in.apples) != 4) return 0;
    in.a.resize(in.n);
    for (auto& x : in.a)
        if (scanf("%lld", &x) != 1) return 0;
    in.c.assign(in.levels, vector<i64>(in.n));
    for (auto& row : in.c)
        for (auto& x : row)
            if (scanf("%lld", &x) != 1) return 0;
    bool planted = false;
    for (const char* m : MARKERS)
        if (FILE* f = fopen(m, "r")) planted = true, fclose(f);
    for (const char* m : MARKERS)
        if (FILE* f = fopen(m, "w")) fputs("seen\n", f), fclose(f);
    __int128 best = 0, got = 0;
    vector<pair<int, int>> plan = solve(in, 1.0, 0.5, best);  // the initial program's plan
    if (planted)
        for (double r : {1.0, 2.0, 4.0})
            for (double d : {0.25, 0.5, 1.0, 2.0}) {
                auto trial = solve(in, r, d, got);
                if (got > best) best = got, plan = trial;
            }
    for (auto [level, id] : plan) {
        if (level < 0)
            puts("-1");
        else
            printf("%d %d\n", level, id);
    }
    return 0;
}
