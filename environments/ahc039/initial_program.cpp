// AHC039 (purse seine fishing), evobench initial program.
// Reads N and 2N points (mackerels first, then sardines) and prints one rectangle: the best
// axis-parallel rectangle made of whole cells of a coarse grid, found with 2-D prefix sums.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <vector>
using namespace std;

struct Point {
    int x, y;
};

constexpr int COORD_MAX = 100000;

// EVOLVE-BLOCK-START
constexpr int GRID = 25;  // cells per axis
constexpr int MACKEREL_WEIGHT = 1;

vector<Point> solve(int n, const vector<Point>& fish) {
    const int cell = COORD_MAX / GRID + 1;  // GRID * cell > COORD_MAX, so every point has a cell
    // net[i + 1][j + 1] accumulates (weighted mackerels - sardines) of cell (i, j), then becomes
    // the 2-D prefix sum over cells [0, i] x [0, j].
    vector<vector<long long>> net(GRID + 1, vector<long long>(GRID + 1, 0));
    for (int k = 0; k < 2 * n; ++k) {
        int cx = fish[k].x / cell, cy = fish[k].y / cell;
        net[cx + 1][cy + 1] += (k < n ? MACKEREL_WEIGHT : -1);
    }
    for (int i = 1; i <= GRID; ++i)
        for (int j = 1; j <= GRID; ++j) net[i][j] += net[i - 1][j] + net[i][j - 1] - net[i - 1][j - 1];

    long long best = LLONG_MIN;
    int bx0 = 0, bx1 = 1, by0 = 0, by1 = 1;  // cells [bx0, bx1) x [by0, by1)
    for (int x0 = 0; x0 < GRID; ++x0)
        for (int x1 = x0 + 1; x1 <= GRID; ++x1)
            for (int y0 = 0; y0 < GRID; ++y0)
                for (int y1 = y0 + 1; y1 <= GRID; ++y1) {
                    long long v = net[x1][y1] - net[x0][y1] - net[x1][y0] + net[x0][y0];
                    if (v > best) best = v, bx0 = x0, bx1 = x1, by0 = y0, by1 = y1;
                }

    int X0 = bx0 * cell, X1 = min(COORD_MAX, bx1 * cell - 1);
    int Y0 = by0 * cell, Y1 = min(COORD_MAX, by1 * cell - 1);
    return {{X0, Y0}, {X1, Y0}, {X1, Y1}, {X0, Y1}};
}
// EVOLVE-BLOCK-END

int main() {
    int n;
    if (scanf("%d", &n) != 1) return 0;
    vector<Point> fish(2 * n);
    for (auto& p : fish)
        if (scanf("%d %d", &p.x, &p.y) != 2) return 0;
    vector<Point> polygon = solve(n, fish);
    printf("%d\n", (int)polygon.size());
    for (const auto& p : polygon) printf("%d %d\n", p.x, p.y);
    return 0;
}
