/* exceptions: the C++ program the perfunwind tests record and unwind:
 * template member functions (names that demangle), std::map and
 * std::string (libstdc++ frames), and an exception thrown through two
 * frames every 64 iterations (libgcc's unwinder and the personality
 * routine on the stack). The argument is the number of iterations.
 */
#include <cstdio>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

namespace ns {
template <class T> struct Box {
	T v;
	__attribute__((noinline)) T spin(T x) const
	{
		for (int i = 0; i < 3000; i++)
			x = x * 3 + v;
		return x;
	}
};
} // namespace ns

__attribute__((noinline)) long thrower(long x)
{
	if ((x & 63) == 7)
		throw std::runtime_error("x" + std::to_string(x));
	ns::Box<long> b{x};
	return b.spin(x);
}

__attribute__((noinline)) long mapper(long x)
{
	std::map<long, std::string> m;
	for (long i = 0; i < 20; i++)
		m[(x * 7919 + i) % 101] = std::to_string(i);
	return (long)m.size();
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000, s = 0;
	for (long i = 0; i < n; i++) {
		try {
			s += thrower(i) + mapper(i);
		} catch (const std::exception &e) {
			s += e.what()[0];
		}
	}
	printf("%ld\n", s);
	return 0;
}
