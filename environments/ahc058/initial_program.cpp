// AHC058 (apple machines), evobench initial program.
// Greedy plan: every turn, estimate how many apples each affordable level-0 or level-1 upgrade
// returns over the remaining turns, buy the one with the best return per apple spent if that
// ratio beats a threshold, otherwise do nothing and save up.
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

// EVOLVE-BLOCK-START
constexpr double MIN_RETURN = 1.0;  // buy only upgrades expected to return more than this per apple
constexpr double LEVEL1_DISCOUNT = 0.5;  // level-1 gains are uncertain (they need level-0 power)

// Returns the action of every turn: {level, id}, or {-1, -1} to do nothing.
vector<pair<int, int>> solve(const Input& in) {
    const int n = in.n, levels = in.levels;
    vector<vector<__int128>> count(levels, vector<__int128>(n, 1));
    vector<vector<i64>> power(levels, vector<i64>(n, 0));
    __int128 apples = in.apples;
    vector<pair<int, int>> plan;
    for (int turn = 0; turn < in.turns; ++turn) {
        const double left = in.turns - turn;  // production steps still to come, this one included
        double best = MIN_RETURN;
        int bi = -1, bj = -1;
        for (int j = 0; j < n; ++j) {
            // Level 0: one more power adds a_j * count_0j apples in each remaining step.
            double cost0 = double(in.c[0][j]) * double(power[0][j] + 1);
            double gain0 = double(in.a[j]) * double(count[0][j]) * left;
            if (cost0 <= double(apples) && gain0 / cost0 > best) best = gain0 / cost0, bi = 0, bj = j;
            if (levels < 2) continue;
            // Level 1: one more power adds count_1j level-0 machines per step, each producing
            // a_j * power_0j apples in every later step.
            double cost1 = double(in.c[1][j]) * double(power[1][j] + 1);
            double gain1 = LEVEL1_DISCOUNT * double(in.a[j]) * double(power[0][j]) * double(count[1][j]) *
                           left * (left - 1) / 2;
            if (cost1 <= double(apples) && gain1 / cost1 > best) best = gain1 / cost1, bi = 1, bj = j;
        }
        if (bi >= 0 && __int128(in.c[bi][bj]) * (power[bi][bj] + 1) > apples) bi = bj = -1;  // rounding
        if (bi >= 0) {
            apples -= __int128(in.c[bi][bj]) * (power[bi][bj] + 1);
            power[bi][bj] += 1;
        }
        plan.push_back({bi, bj});
        // Production, level 0 first; level i uses its count from before this step.
        for (int j = 0; j < n; ++j) apples += __int128(in.a[j]) * count[0][j] * power[0][j];
        for (int lv = 1; lv < levels; ++lv)
            for (int j = 0; j < n; ++j) count[lv - 1][j] += count[lv][j] * power[lv][j];
    }
    return plan;
}
// EVOLVE-BLOCK-END

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
    for (auto [level, id] : solve(in)) {
        if (level < 0)
            puts("-1");
        else
            printf("%d %d\n", level, id);
    }
    return 0;
}
