// A plugin's checkpoint state as the SDK writes and reads it: numbers, strings and fp32
// arrays in order, read back in the same order, short or damaged data refused.
#pragma once

#include "trainhost/abi.h"
#include "trainhost/host_link.hpp"

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace trainhost::sdk {

// A plugin's checkpoint state: plain values and strings, written in order.
class StateWriter {
public:
    explicit StateWriter(HostLink link) noexcept : link_(link) {}
    // Numbers only: a pointer or a view would be saved as an address, a struct with its
    // padding's stray bytes, and a bool or an enum read back from a damaged file could
    // hold a value its type has not (write those as integers and check them on load).
    template <typename T>
    void put(const T& value) {
        static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                      "put() takes a number (a bool or an enum as an integer); put_string for text, put_floats for "
                      "fp32 arrays");
        write(&value, sizeof value);
    }
    void put_string(const std::string& text) {
        put<std::uint64_t>(text.size());
        write(text.data(), text.size());
    }
    // fp32 values in one write, laid out as put_string of their bytes.
    void put_floats(std::span<const float> values) {
        put<std::uint64_t>(values.size_bytes());
        write(values.data(), values.size_bytes());
    }

private:
    void write(const void* bytes, std::size_t size) {
        link_.check(link_.api().state_write(link_.host(), bytes, size), "state_write");
    }
    HostLink link_;
};

// Reads back what a StateWriter wrote, in the same order; refuses short data.
class StateReader {
public:
    StateReader(const void* bytes, std::uint64_t size) noexcept
        : bytes_(static_cast<const unsigned char*>(bytes)), size_(size) {}
    template <typename T>
    [[nodiscard]] T get() {
        static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                      "get() reads a number (a bool or an enum as an integer); get_string for text, get_floats for "
                      "fp32 arrays");
        T value;
        read(&value, sizeof value);
        return value;
    }
    [[nodiscard]] std::string get_string() {
        const auto length = get<std::uint64_t>();
        if (length > size_ - offset_) throw std::runtime_error("saved state is truncated");
        std::string text(reinterpret_cast<const char*>(bytes_ + offset_), length);
        offset_ += length;
        return text;
    }
    // What put_floats wrote; refuses bytes that are no whole number of floats.
    [[nodiscard]] std::vector<float> get_floats() {
        const std::string bytes = get_string();
        if (bytes.size() % sizeof(float) != 0)
            throw std::runtime_error("saved state has " + std::to_string(bytes.size()) +
                                     " bytes where fp32 values were written, no multiple of 4");
        std::vector<float> values(bytes.size() / sizeof(float));
        if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
        return values;
    }
    [[nodiscard]] bool done() const noexcept { return offset_ == size_; }
    // The bytes not read yet: a count read from the state is checked against them
    // before it sizes anything.
    [[nodiscard]] std::uint64_t remaining() const noexcept { return size_ - offset_; }

private:
    void read(void* out, std::size_t size) {
        if (size > size_ - offset_) throw std::runtime_error("saved state is truncated");
        std::memcpy(out, bytes_ + offset_, size);
        offset_ += size;
    }
    const unsigned char* bytes_;
    std::uint64_t size_;
    std::uint64_t offset_ = 0;
};

}  // namespace trainhost::sdk
