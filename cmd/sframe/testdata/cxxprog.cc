// C++ test program for `sframe stack`: frames whose names need demangling
// (a namespace, a template, a lambda in std::sort, a virtual function, a
// std::string parameter), in threads blocked in pause().
//
// Build: g++ -O2 -fomit-frame-pointer -Wa,--gsframe -pthread cxxprog.cc.
// Prints "ready" once both worker threads are about to block.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

static std::atomic<int> started;

namespace shapes {
struct Shape {
	virtual int area(const std::string &why) = 0;
	virtual ~Shape() {}
};
struct Square : Shape {
	__attribute__((noinline)) int area(const std::string &why) override {
		if (why.size() == 5) {
			started++;
			for (;;) pause();
		}
		return int(why.size());
	}
};
}  // namespace shapes

static shapes::Shape *volatile shape = new shapes::Square;

template <typename T>
__attribute__((noinline)) int sortAll(std::vector<T> &v) {
	std::sort(v.begin(), v.end(), [](T a, T b) {
		if (a == 1) shape->area("block");
		return a < b;
	});
	return int(v.size());
}

__attribute__((noinline)) int nested(int n) {
	if (n > 0) return nested(n - 1) + 1;
	std::vector<long> v{3, 1, 2};
	return sortAll(v);
}

__attribute__((noinline)) void idle() {
	started++;
	for (;;) pause();
}

int main() {
	std::thread a([] { nested(3); });
	std::thread b(idle);
	while (started.load() < 2) usleep(1000);
	printf("ready\n");
	fflush(stdout);
	a.join();
}
