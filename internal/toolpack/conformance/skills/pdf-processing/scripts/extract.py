import sys

def main(path):
    print(f"extracting text from {path}")

if __name__ == "__main__":
    main(sys.argv[1])
