// Throws and catches a C++ exception: unwinding goes through libstdc++
// and libgcc_s, which find .eh_frame through dl_iterate_phdr or
// _dl_find_object, and so through the program headers of each library.
#include <cstdio>
#include <stdexcept>
#include <string>

__attribute__((noinline)) static void thrower(int n) {
	if (n == 0)
		throw std::runtime_error("boom");
	thrower(n - 1);
}

int main() {
	try {
		thrower(3);
	} catch (const std::exception &e) {
		std::printf("caught %s\n", e.what());
		return 0;
	}
	return 1;
}
